#pragma once
// Writing a file so that a reader sees the old content or the new, never half of it: baselines, reports, the
// dashboard's files. The lowest floor (io), so that every writer can use it without including the baseline store.
#include <filesystem>
#include <string>

namespace perfgate {

// Writes `content` to `file` atomically: a temporary file in the same folder, fsync, rename over the
// target, fsync of the folder. Creates missing parent folders. Throws std::system_error on I/O errors
// (the temporary file is removed).
void write_file_atomically(const std::filesystem::path& file, const std::string& content);

}  // namespace perfgate
