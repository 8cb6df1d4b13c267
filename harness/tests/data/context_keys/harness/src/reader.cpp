// A fixture for tools/check_context_keys.py: a comment may name "perfgate.suite";
/* so may a block comment: "perfgate.gpu_count" */
const char* const kKey = "perfgate.cpu_model";  // the one the check must name
