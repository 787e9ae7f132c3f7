//! Hostile decoders inputs (issue 21): each test fails without its fix.
