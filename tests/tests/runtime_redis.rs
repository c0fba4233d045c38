//! The runtime suite on the Redis checkpointer.

waypoint_tests::runtime_suite!(waypoint_tests::savers::redis());
