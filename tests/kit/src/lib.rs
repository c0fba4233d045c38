//! Test helpers shared by Waypoint's crates: the throwaway servers the test script starts.
