//! The workloads Waypoint's benchmarks and `waypoint bench` measure.
