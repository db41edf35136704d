pub mod gbnf;
