#pragma once
// A small least-recently-used map for what the benchmark keeps between cases of one process (problems,
// exchange rounds, layers). The harness interleaves cases in random order, so a single-entry cache rebuilt
// everything at almost every switch; an unbounded one would run out of GPU memory. make_room() evicts before
// the caller builds a new value, so that the evicted value's memory is free by then.
#include <cstddef>
#include <list>
#include <stdexcept>
#include <utility>

namespace perfgate::expert_parallel {

template <typename Key, typename Value>
class LruCache {
 public:
  explicit LruCache(std::size_t capacity) : capacity_(capacity) {
    if (capacity == 0) throw std::invalid_argument("LruCache needs a capacity of at least 1");
  }

  // The value of key, now the most recently used; nullptr when absent.
  Value* find(const Key& key) {
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->first == key) {
        items_.splice(items_.begin(), items_, it);
        return &items_.front().second;
      }
    return nullptr;
  }

  // Evicts the least recently used values until one more fits.
  void make_room() {
    while (items_.size() >= capacity_) items_.pop_back();
  }

  // Adds key (absent) as the most recently used value, evicting first when full.
  Value& insert(const Key& key, Value value) {
    make_room();
    items_.emplace_front(key, std::move(value));
    return items_.front().second;
  }

  void erase(const Key& key) {
    items_.remove_if([&key](const auto& item) { return item.first == key; });
  }
  void clear() { items_.clear(); }
  std::size_t size() const { return items_.size(); }
  std::size_t capacity() const { return capacity_; }

 private:
  std::size_t capacity_;
  std::list<std::pair<Key, Value>> items_;  // the most recently used first
};

}  // namespace perfgate::expert_parallel
