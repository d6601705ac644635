//! Prometheus credentials that follow their files: a `{file: …}` secret of
//! a profile's `prometheus` section is read again on the first request
//! after the file changed, so a projected service-account token (which the
//! kubelet replaces before it expires) or a rotated Secret takes effect on
//! the next query, without a restart.
//!
//! Why a `stat` per request rather than a timer: the next query after a
//! change already carries the new value, and an unchanged file costs one
//! system call and no read. Requests come from the background pollers only;
//! a gRPC call never reaches this code.

use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use super::error::ProfileError;
use super::sections::{PrometheusProfile, RequestAuth};

/// One version of a file, as `stat` (following symlinks) sees it.
/// Kubernetes updates a mounted Secret or projected token by pointing a
/// symlink at a new directory, so the file followed gets a new inode and
/// modification time; an editor or `echo >` changes the time or length.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stamp {
    /// The file's identity, time and length.
    Seen {
        modified: Option<SystemTime>,
        len: u64,
        id: (u64, u64),
    },
    /// `stat` failed; the next successful one differs and triggers a read.
    Unreadable(std::io::ErrorKind),
}

fn stamp(path: &Path) -> Stamp {
    match std::fs::metadata(path) {
        Ok(meta) => Stamp::Seen {
            modified: meta.modified().ok(),
            len: meta.len(),
            id: file_id(&meta),
        },
        Err(e) => Stamp::Unreadable(e.kind()),
    }
}

#[cfg(unix)]
fn file_id(meta: &Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn file_id(_meta: &Metadata) -> (u64, u64) {
    (0, 0)
}

/// The Prometheus credentials of one profile, re-read when a file they
/// come from changes. Its `Debug` shows no secret ([`RequestAuth`] redacts).
#[derive(Debug)]
pub struct PrometheusAuth {
    profile: String,
    section: PrometheusProfile,
    files: Vec<PathBuf>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The files' stamps taken before `auth` was read.
    stamps: Vec<Stamp>,
    auth: Arc<RequestAuth>,
}

impl PrometheusAuth {
    /// Read the section's secrets now (an unreadable one is an error here,
    /// at start-up).
    pub fn load(
        profile: &str,
        section: &PrometheusProfile,
    ) -> Result<PrometheusAuth, ProfileError> {
        let files: Vec<PathBuf> = section.files().into_iter().map(Path::to_path_buf).collect();
        // Stamps first: a change during the read is then seen as a change
        // at the next request, never missed.
        let stamps = files.iter().map(|f| stamp(f)).collect();
        let auth = Arc::new(section.request_auth(profile)?);
        Ok(PrometheusAuth {
            profile: profile.to_owned(),
            section: section.clone(),
            files,
            state: Mutex::new(State { stamps, auth }),
        })
    }

    /// The credentials as the files hold them now: the kept ones while no
    /// file changed, else read again. A file that cannot be read is an
    /// error naming it (never its content), and is tried again at the next
    /// request; the kept credentials are not used meanwhile, since a token
    /// whose file vanished is one the platform meant to withdraw.
    pub fn current(&self) -> Result<Arc<RequestAuth>, ProfileError> {
        let stamps: Vec<Stamp> = self.files.iter().map(|f| stamp(f)).collect();
        {
            let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.stamps == stamps {
                return Ok(state.auth.clone());
            }
        }
        // Read outside the lock; two pollers racing here both read the
        // same files, which is harmless.
        let auth = Arc::new(self.section.request_auth(&self.profile)?);
        tracing::info!(
            profile = %self.profile,
            "a Prometheus credentials file changed: credentials read again"
        );
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.stamps = stamps;
        state.auth = auth.clone();
        Ok(auth)
    }
}
