//! csi-conform-report: a run's results and every form they are reported in (text, JSON, JUnit,
//! HTML, Markdown, the live console).

pub mod report;

use csi_client::fingerprint;
use csi_proto::{proto, yaml};
use csi_spec::spec;
