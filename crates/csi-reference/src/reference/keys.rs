//! The publish_context keys the reference plugin hands out (and its quirks read back).

/// The publish_context key naming the (pretend) device of a published volume.
pub const DEVICE_KEY: &str = "csi-conform.dev/device";
/// The publish_context key naming the node a volume was published to.
pub const NODE_KEY: &str = "csi-conform.dev/node";
