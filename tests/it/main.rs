//! Integration tests for csi-conform: one binary, one module per concern.

mod suite_load;
mod suite_run;
mod support;
