//! The `echo-secrets` quirk: the plugin repeats what it received that must never be shown
//! (secrets, mount flags carrying data) in its error messages and in the contexts it answers
//! with, raw and in the encodings plugins put values in (JSON-quoted, base64, base64url, URL
//! encoding, hex), as plugins that log or wrap their whole request do. It proves the harness
//! scrubs everything a plugin sends back.

use base64::Engine as _;
use tonic::Status;

use crate::proto::{self, v1};

/// What a request carried that the plugin will echo: its sensitive values.
pub(super) struct Echo(Vec<String>);

impl Echo {
    /// The sensitive values of `request`, `None` when it carries none.
    pub(super) fn of<R: prost::Message + prost::Name>(request: &R) -> Option<Echo> {
        let mut values = proto::sensitive_values(&proto::to_dynamic(request));
        values.sort();
        values.dedup();
        (!values.is_empty()).then_some(Echo(values))
    }

    /// Every value with each of its encodings, `(label, text)`.
    fn encodings(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (i, v) in self.0.iter().enumerate() {
            let url: String = v
                .bytes()
                .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
                .collect();
            out.push((format!("{i}"), v.clone()));
            out.push((format!("{i}.json"), serde_json::to_string(v).unwrap_or_default()));
            out.push((format!("{i}.b64"), base64::engine::general_purpose::STANDARD.encode(v)));
            out.push((format!("{i}.b64url"), base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("x{v}"))));
            out.push((format!("{i}.url"), url));
            out.push((format!("{i}.hex"), v.bytes().map(|b| format!("{b:02x}")).collect()));
        }
        out
    }

    /// `status` with everything received appended to its message.
    pub(super) fn status(&self, status: Status) -> Status {
        let echoed: Vec<String> = self.encodings().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        Status::new(status.code(), format!("{} (received: {})", status.message(), echoed.join(" ")))
    }

    /// `answer` with everything received added to its volume_context (CreateVolume) or
    /// publish_context (ControllerPublishVolume); other answers as they are.
    pub(super) fn answer<R: 'static>(&self, mut answer: R) -> R {
        let any: &mut dyn std::any::Any = &mut answer;
        let context = if let Some(created) = any.downcast_mut::<v1::CreateVolumeResponse>() {
            created.volume.as_mut().map(|v| &mut v.volume_context)
        } else if let Some(published) = any.downcast_mut::<v1::ControllerPublishVolumeResponse>() {
            Some(&mut published.publish_context)
        } else {
            None
        };
        if let Some(context) = context {
            context.extend(self.encodings().into_iter().map(|(k, v)| (format!("echo/{k}"), v)));
        }
        answer
    }
}
