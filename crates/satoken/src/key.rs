//! The cluster's service-account signing key (upstream's `sa.key`).
//!
//! Upstream signs with RS256 from an RSA key kubeadm generates. We generate an ECDSA P-256 key
//! and sign ES256, which kube-apiserver equally accepts for `--service-account-key-file`: ring
//! (through rcgen, already what makes the cluster's certificates) generates P-256 keys but not RSA
//! ones, and the pure-Rust RSA key generation is slow in test builds and has a timing advisory
//! (RUSTSEC-2023-0071) on its private-key operations.

use base64::Engine as _;
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use ring::{
    rand::SystemRandom,
    signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair},
};
use serde::{Serialize, de::DeserializeOwned};
use std::path::{Path, PathBuf};

/// Why a key could not be made, read or used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Reading or writing the key file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The key does not parse, or is not an ECDSA P-256 key.
    #[error("not an ECDSA P-256 private key in PKCS#8 PEM: {0}")]
    Pem(String),
    /// Generating a key failed.
    #[error("generating a key: {0}")]
    Generate(String),
    /// Signing failed.
    #[error("failed to generate token: {0}")]
    Sign(String),
}

/// Why a token signed (or claiming to be signed) by this cluster is not accepted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    /// The signature does not verify, or the token is not a well-formed JWS for this key.
    /// (Upstream's message is go-jose's.)
    #[error("square/go-jose: error in cryptographic primitive")]
    Signature,
    /// The signature verifies but the claims do not decode as the token's kind.
    #[error("service account token claims could not be validated due to unexpected private claim")]
    Claims,
}

/// The signing key: its private half signs tokens, its public half verifies them.
pub struct Key {
    /// Parsed once: the kubelet asks for a token for every pod it starts, and parsing the PKCS#8
    /// key (which derives and validates the public point, a scalar multiplication) cost as much
    /// as the signature itself when done per token. ring's P-256, not the pure-Rust `p256`
    /// crate's: signing was 2.2% of `bench phases`' CPU with `p256`, at a few times ring's cost
    /// per signature (ring's nonces are random rather than RFC 6979's, which ES256 allows).
    signer: EcdsaKeyPair,
    rng: SystemRandom,
    /// The JWS header every token carries (ES256 and this key's id), base64url-encoded once.
    header: String,
    decoding: DecodingKey,
    /// The `kid` header tokens carry (upstream's `keyIDFromPublicKey`).
    id: String,
    private_pem: String,
    public_pem: String,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key").field("algorithm", &"ES256").finish()
    }
}

impl Key {
    /// A new random key.
    pub fn generate() -> Result<Self, KeyError> {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| KeyError::Generate(e.to_string()))?;
        Self::from_pem(&pair.serialize_pem())
    }

    /// The key in `pem` (PKCS#8 `PRIVATE KEY`).
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        let pair = rcgen::KeyPair::from_pem(pem).map_err(|e| KeyError::Pem(e.to_string()))?;
        if !pair.is_compatible(&rcgen::PKCS_ECDSA_P256_SHA256) {
            return Err(KeyError::Pem("the key is of another algorithm".into()));
        }
        let public_pem = pair.public_key_pem();
        let id = {
            use rcgen::PublicKeyData as _;
            use sha2::Digest as _;
            let digest = sha2::Sha256::digest(pair.subject_public_key_info());
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
        };
        let rng = SystemRandom::new();
        let signer = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            pair.serialized_der(),
            &rng,
        )
        .map_err(|e| KeyError::Pem(e.to_string()))?;
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(id.clone());
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(serde_json::to_vec(&header).map_err(|e| KeyError::Pem(e.to_string()))?);
        let decoding = DecodingKey::from_ec_pem(public_pem.as_bytes())
            .map_err(|e| KeyError::Pem(e.to_string()))?;
        Ok(Self {
            signer,
            rng,
            header,
            decoding,
            id,
            private_pem: pem.to_string(),
            public_pem,
        })
    }

    /// The key stored at `path`, generated and written there (readable by its owner only) when
    /// the file does not exist, so that tokens stay valid across restarts.
    pub fn load_or_create(path: &Path) -> Result<Self, KeyError> {
        let io = |source| KeyError::Io {
            path: path.to_path_buf(),
            source,
        };
        match std::fs::read_to_string(path) {
            Ok(pem) => Self::from_pem(&pem),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = Self::generate()?;
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(io)?;
                }
                write_private(path, &key.private_pem).map_err(io)?;
                Ok(key)
            }
            Err(e) => Err(io(e)),
        }
    }

    /// The public key (SubjectPublicKeyInfo PEM), what verifiers need (upstream's `sa.pub`).
    pub fn public_pem(&self) -> &str {
        &self.public_pem
    }

    /// The key's id: the unpadded base64url SHA-256 of its public key (DER SubjectPublicKeyInfo),
    /// which upstream puts in every token's `kid` header and its JWKS document.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Signs `claims` ([`crate::BoundClaims`] or [`crate::LegacyClaims`]) into a compact JWS:
    /// what `jsonwebtoken::encode` makes (RFC 7515's `header.claims.signature`, ES256's signature
    /// as the 64 bytes `r || s`), with the key and header prepared once.
    pub fn sign<C: Serialize>(&self, claims: &C) -> Result<String, KeyError> {
        let b64 = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let claims = serde_json::to_vec(claims).map_err(|e| KeyError::Sign(e.to_string()))?;
        let mut token = String::with_capacity(self.header.len() + claims.len() * 4 / 3 + 100);
        token.push_str(&self.header);
        token.push('.');
        b64.encode_string(claims, &mut token);
        let signature = self
            .signer
            .sign(&self.rng, token.as_bytes())
            .map_err(|e| KeyError::Sign(e.to_string()))?;
        token.push('.');
        b64.encode_string(signature.as_ref(), &mut token);
        Ok(token)
    }

    /// The claims of `token` if this key signed it. Nothing else is checked here: times,
    /// audiences and the objects named are the caller's (they need the cluster's state).
    pub fn verify<C: DeserializeOwned>(&self, token: &str) -> Result<C, VerifyError> {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        match jsonwebtoken::decode::<C>(token, &self.decoding, &validation) {
            Ok(data) => Ok(data.claims),
            Err(e) => match e.kind() {
                jsonwebtoken::errors::ErrorKind::Json(_) => Err(VerifyError::Claims),
                _ => Err(VerifyError::Signature),
            },
        }
    }
}

/// Writes `contents` to a new file only its owner may read. (The same as the API server's
/// `tls::write_private`, which this crate cannot depend on: the server depends on it.)
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use crate::{Binding, BoundClaims, LegacyClaims, ObjectRef};

    fn claims() -> BoundClaims {
        BoundClaims::new(
            crate::DEFAULT_ISSUER,
            "ns",
            ObjectRef::new("sa", "u"),
            Some(Binding::Secret(ObjectRef::new("s", "su"))),
            vec!["a".into(), "b".into()],
            100,
            600,
            0,
        )
    }

    #[test]
    fn a_signed_token_verifies_with_its_key_only() {
        let key = Key::generate().unwrap();
        let token = key.sign(&claims()).unwrap();
        assert_eq!(key.verify::<BoundClaims>(&token).unwrap(), claims());
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.alg, Algorithm::ES256);
        assert_eq!(header.kid.as_deref(), Some(key.id()));
        assert_eq!(key.id().len(), 43);
        assert_eq!(
            crate::issuer_of(&token).as_deref(),
            Some(crate::DEFAULT_ISSUER)
        );
        let other = Key::generate().unwrap();
        assert_eq!(
            other.verify::<BoundClaims>(&token),
            Err(VerifyError::Signature)
        );
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            br#"{"iss":"x"}"#,
        );
        parts[1] = &forged;
        assert_eq!(
            key.verify::<BoundClaims>(&parts.join(".")),
            Err(VerifyError::Signature)
        );
        // A legacy token is not a bound token's claims.
        let legacy = key
            .sign(&LegacyClaims::new("ns", &ObjectRef::new("sa", "u"), "s"))
            .unwrap();
        assert_eq!(key.verify::<BoundClaims>(&legacy), Err(VerifyError::Claims));
        assert!(key.verify::<LegacyClaims>(&legacy).is_ok());
    }

    #[test]
    fn the_key_file_is_created_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pki/sa.key");
        let key = Key::load_or_create(&path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = Key::load_or_create(&path).unwrap();
        assert_eq!(again.public_pem(), key.public_pem());
        let token = key.sign(&claims()).unwrap();
        assert!(again.verify::<BoundClaims>(&token).is_ok());
        std::fs::write(&path, "garbage").unwrap();
        assert!(matches!(Key::load_or_create(&path), Err(KeyError::Pem(_))));
    }
}
