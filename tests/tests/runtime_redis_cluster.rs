//! The runtime suite on the Redis checkpointer over a Redis Cluster.

waypoint_tests::runtime_suite!(waypoint_tests::savers::redis_cluster());
