#include "perfgate/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <system_error>

#include <fmt/format.h>

namespace perfgate {

void write_file_atomically(const std::filesystem::path& file, const std::string& content) {
  namespace fs = std::filesystem;
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  fs::create_directories(dir);
  std::random_device rd;
  const fs::path tmp = dir / fmt::format(".{}.tmp.{}.{:08x}", file.filename().string(), ::getpid(), rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  // The messages name the file asked for: the temporary beside it is perfgate's own business.
  if (fd < 0)
    throw std::system_error(errno, std::generic_category(),
                            fmt::format("cannot write {} (creating {})", file.string(), tmp.filename().string()));
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), fmt::format("{} {}", what, file.string()));
  };
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("cannot fsync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), "cannot write " + file.string() + " (closing)");
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), "cannot rename to " + file.string());
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace perfgate
