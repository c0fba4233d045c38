//! The runtime suite on the postgres checkpointer.

waypoint_tests::runtime_suite!(waypoint_tests::savers::postgres());
