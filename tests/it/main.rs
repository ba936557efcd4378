//! Integration tests for csi-conform: one binary, one module per concern.

mod bad_input;
mod budgets;
mod cleanup;
mod client;
mod compare;
mod compat;
mod console;
mod docs;
mod fingerprint;
mod lifecycle;
mod html;
mod interrupt;
mod leaks;
mod loaders;
mod misbehaving;
mod mounts;
mod proto;
mod quirks;
mod quirks_detected;
mod reference;
mod report;
mod run;
mod suite_load;
mod suite_run;
mod support;
