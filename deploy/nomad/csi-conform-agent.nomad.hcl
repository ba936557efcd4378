# csi-conform node agents on every Nomad client (a system job) beside the CSI node plugin,
# registered in Nomad's service discovery as "csi-conform-agent":
#   nomad job run -var plugin_id=hostpath deploy/nomad/csi-conform-agent.nomad.hcl
#   csi-conform run --controller-endpoint ... --agent-tls-dir certs/ \
#     --node-agents nomad://127.0.0.1:4646/csi-conform-agent   # (NOMAD_TOKEN when ACLs are on)
# The agents' TLS files come from Nomad variables (nomad/jobs/csi-conform-agent):
#   nomad var put nomad/jobs/csi-conform-agent ca=@certs/ca.pem agent=@certs/agent.pem key=@certs/agent-key.pem
# docs/agents.md says what each privilege below is for.

variable "image" {
  type    = string
  default = "ghcr.io/OWNER/csi-conform:0.1.0"
}

variable "plugin_id" {
  type        = string
  description = "The csi_plugin id of the node plugin's job"
}

variable "csi_dir" {
  type        = string
  default     = "/var/lib/nomad/client/csi"
  description = "The Nomad client's CSI directory (<data_dir>/client/csi)"
}

variable "plugin_mount_dir" {
  type        = string
  default     = "/csi"
  description = "The node plugin's csi_plugin mount_dir: where the plugin sees its staging and target paths"
}

job "csi-conform-agent" {
  type = "system"

  group "agent" {
    network {
      port "grpc" {
        static = 7443
      }
    }

    service {
      name     = "csi-conform-agent"
      port     = "grpc"
      provider = "nomad"
    }

    task "agent" {
      driver = "docker"

      config {
        image        = var.image
        network_mode = "host"
        # The plugin's process is found through its socket and its mounts read in its own
        # mount namespace (/proc/PID): the host's pid namespace.
        pid_mode = "host"
        # Shared mount propagation and /proc/PID/root of a privileged plugin need it.
        privileged = true
        args = [
          "agent",
          "--listen=tcp://0.0.0.0:${NOMAD_PORT_grpc}",
          "--plugin-endpoint=unix://${var.csi_dir}/node/${var.plugin_id}/csi.sock",
          # As the plugin sees it (the agent reaches the plugin's files through its mount
          # namespace): the run's --work-dir must be inside it.
          "--work-dir=${var.plugin_mount_dir}/csi-conform",
          "--tls-dir=/secrets",
        ]

        # The client's CSI directory at the same path: the plugin's socket is there; rshared,
        # so what the plugin mounts under it is seen here too.
        mount {
          type   = "bind"
          source = var.csi_dir
          target = var.csi_dir
          bind_options {
            propagation = "rshared"
          }
        }
      }

      template {
        data        = "{{ with nomadVar \"nomad/jobs/csi-conform-agent\" }}{{ .ca }}{{ end }}"
        destination = "secrets/ca.pem"
      }

      template {
        data        = "{{ with nomadVar \"nomad/jobs/csi-conform-agent\" }}{{ .agent }}{{ end }}"
        destination = "secrets/agent.pem"
      }

      template {
        data        = "{{ with nomadVar \"nomad/jobs/csi-conform-agent\" }}{{ .key }}{{ end }}"
        destination = "secrets/agent-key.pem"
        perms       = "0400"
      }

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
