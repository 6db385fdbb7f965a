//! The topology DSL: sources over share groups, stateless operators, sinks.
//!
//! Not built yet: reserved for the runtime issue.
