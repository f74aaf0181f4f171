//! bindgen output for spdk-glue/hhc_glue.h (and nothing else).

#![allow(non_camel_case_types, non_upper_case_globals, dead_code)]

include!(concat!(env!("OUT_DIR"), "/hhc_glue.rs"));
