//! intstr
