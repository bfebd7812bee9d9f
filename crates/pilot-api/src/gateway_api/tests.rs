//! Rules of the Gateway API kinds the corpus does not exercise, on small
//! specs written here.
