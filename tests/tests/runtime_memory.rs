//! The runtime suite on the memory checkpointer.

waypoint_tests::runtime_suite!(waypoint_tests::savers::memory());
