//! The runtime suite on the sqlite checkpointer.

waypoint_tests::runtime_suite!(waypoint_tests::savers::sqlite());
