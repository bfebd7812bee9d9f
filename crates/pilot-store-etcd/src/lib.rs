//! etcd backend
