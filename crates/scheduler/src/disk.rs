//! The inline disks a pod mounts that only one pod on a node may use read-write (GCE PD, AWS EBS,
//! iSCSI, RBD), read once from the pod's spec into its `PodInfo` and summed per node in its
//! `Usage`; the `VolumeRestrictions` filter compares them. A leaf, so that the pod and node infos
//! below every plugin do not depend on the plugin that checks them.

use k8s_openapi::api::core::v1::PodSpec;
use std::collections::BTreeSet;

/// An inline volume that only one pod on a node may mount read-write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disk {
    /// `gcePersistentDisk`.
    GcePd {
        /// `pdName`.
        name: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// `awsElasticBlockStore`: no two mounts at all.
    AwsEbs {
        /// `volumeID`.
        id: String,
    },
    /// `iscsi`.
    Iscsi {
        /// `iqn`.
        iqn: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// `rbd`.
    Rbd {
        /// `monitors`.
        monitors: BTreeSet<String>,
        /// `pool`, defaulted to `rbd` by the API server.
        pool: String,
        /// `image`.
        image: String,
        /// `readOnly`.
        read_only: bool,
    },
}

impl Disk {
    /// Upstream's `isVolumeConflict` for one pair of volumes.
    pub fn conflicts(&self, other: &Disk) -> bool {
        use Disk::*;
        match (self, other) {
            (
                GcePd { name, read_only },
                GcePd {
                    name: n,
                    read_only: r,
                },
            ) => name == n && !(*read_only && *r),
            (AwsEbs { id }, AwsEbs { id: other }) => id == other,
            (
                Iscsi { iqn, read_only },
                Iscsi {
                    iqn: i,
                    read_only: r,
                },
            ) => iqn == i && !(*read_only && *r),
            (
                Rbd {
                    monitors,
                    pool,
                    image,
                    read_only,
                },
                Rbd {
                    monitors: m,
                    pool: p,
                    image: i,
                    read_only: r,
                },
            ) => !monitors.is_disjoint(m) && pool == p && image == i && !(*read_only && *r),
            _ => false,
        }
    }
}

/// The inline disks a pod mounts.
pub fn disks(spec: &PodSpec) -> Vec<Disk> {
    let mut out = Vec::new();
    for v in spec.volumes.iter().flatten() {
        if let Some(d) = &v.gce_persistent_disk {
            out.push(Disk::GcePd {
                name: d.pd_name.clone(),
                read_only: d.read_only.unwrap_or(false),
            });
        }
        if let Some(d) = &v.aws_elastic_block_store {
            out.push(Disk::AwsEbs {
                id: d.volume_id.clone(),
            });
        }
        if let Some(d) = &v.iscsi {
            out.push(Disk::Iscsi {
                iqn: d.iqn.clone(),
                read_only: d.read_only.unwrap_or(false),
            });
        }
        if let Some(d) = &v.rbd {
            out.push(Disk::Rbd {
                monitors: d.monitors.iter().cloned().collect(),
                pool: d.pool.clone().unwrap_or_else(|| "rbd".into()),
                image: d.image.clone(),
                read_only: d.read_only.unwrap_or(false),
            });
        }
    }
    out
}
