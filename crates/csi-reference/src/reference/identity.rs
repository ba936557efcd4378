//! The reference plugin's Identity service: GetPluginInfo, GetPluginCapabilities, Probe.

use tonic::{Request, Response, Status};

use crate::proto::v1::{
    self, controller_service_capability::rpc::Type as ControllerRpc, identity_server::Identity,
    node_service_capability::rpc::Type as NodeRpc, plugin_capability,
};

use super::{Mode, Plugin, Service};

/// Where to read about the reference plugin (GetPluginInfo's manifest).
pub const MANIFEST_URL: &str = "https://csi-conform.dev/reference-plugin";

impl Plugin {
    fn get_plugin_info(
        &self,
        _: v1::GetPluginInfoRequest,
    ) -> Result<v1::GetPluginInfoResponse, Status> {
        let mode = match self.config.mode {
            Mode::All => "controller+node",
            Mode::NodeOnly => "node",
            Mode::ControllerOnly => "controller",
        };
        Ok(v1::GetPluginInfoResponse {
            name: self.config.name.clone(),
            vendor_version: self.config.vendor_version.clone(),
            manifest: [
                ("url".to_owned(), MANIFEST_URL.to_owned()),
                ("mode".to_owned(), mode.to_owned()),
            ]
            .into(),
        })
    }

    fn get_plugin_capabilities(
        &self,
        _: v1::GetPluginCapabilitiesRequest,
    ) -> Result<v1::GetPluginCapabilitiesResponse, Status> {
        use plugin_capability::{Service as Svc, Type, VolumeExpansion, volume_expansion};
        let mut capabilities: Vec<v1::PluginCapability> = self
            .caps
            .plugin
            .iter()
            .map(|t| v1::PluginCapability {
                r#type: Some(Type::Service(Svc { r#type: *t as i32 })),
            })
            .collect();
        // ONLINE promises ControllerExpandVolume or NodeExpandVolume; advertise it only when
        // one of them is enabled.
        let can_expand = self.caps.has_controller(ControllerRpc::ExpandVolume)
            || self.caps.has_node(NodeRpc::ExpandVolume);
        if self.caps.online_expansion && can_expand {
            capabilities.push(v1::PluginCapability {
                r#type: Some(Type::VolumeExpansion(VolumeExpansion {
                    r#type: volume_expansion::Type::Online as i32,
                })),
            });
        }
        Ok(v1::GetPluginCapabilitiesResponse { capabilities })
    }

    fn probe(&self, _: v1::ProbeRequest) -> Result<v1::ProbeResponse, Status> {
        Ok(v1::ProbeResponse {
            ready: Some(self.started.elapsed() >= self.config.ready_after),
        })
    }
}

#[tonic::async_trait]
impl Identity for Service {
    async fn get_plugin_info(
        &self,
        request: Request<v1::GetPluginInfoRequest>,
    ) -> Result<Response<v1::GetPluginInfoResponse>, Status> {
        self.told("GetPluginInfo", self.call("GetPluginInfo", request, Plugin::get_plugin_info).await)
    }

    async fn get_plugin_capabilities(
        &self,
        request: Request<v1::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<v1::GetPluginCapabilitiesResponse>, Status> {
        self.call(
            "GetPluginCapabilities",
            request,
            Plugin::get_plugin_capabilities,
        )
        .await
    }

    async fn probe(
        &self,
        request: Request<v1::ProbeRequest>,
    ) -> Result<Response<v1::ProbeResponse>, Status> {
        self.call("Probe", request, Plugin::probe).await
    }
}
