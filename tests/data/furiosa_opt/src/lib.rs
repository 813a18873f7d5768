//! The part of furiosa-opt-examples' lib.rs these files need (the other examples left out).
pub mod transformer;
