pub(crate) mod attention;
pub(crate) mod lm_head;
pub(crate) mod mlp;
pub(crate) mod projection;
pub(crate) mod residual;
pub(crate) mod rmsnorm;
pub(crate) mod rope;
