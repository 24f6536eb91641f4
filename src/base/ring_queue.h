#pragma once
// A FIFO queue in one ring of slots that grows by doubling and never shrinks: pushing at the back
// and popping at the front allocate nothing once the ring has held as many elements as are ever
// queued at once (std::deque allocates a node, and frees one, every few elements as it slides).
//
// Elements are constructed in place and destroyed in place, never assigned: a type whose move
// assignment is unusable (Boost 1.81's any_completion_handler) can be queued. Iteration runs
// front to back; an iterator is invalidated by any push or pop.

#include <cstddef>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

namespace flashsale::base {

template <typename T>
class RingQueue {
 public:
  RingQueue() = default;
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }

  T& front() { return *slots_[head_]; }
  const T& front() const { return *slots_[head_]; }

  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == slots_.size()) Grow();
    std::optional<T>& slot = slots_[(head_ + size_) & (slots_.size() - 1)];
    slot.emplace(std::forward<Args>(args)...);
    ++size_;
    return *slot;
  }
  void push_back(T&& value) { emplace_back(std::move(value)); }

  void pop_front() {
    slots_[head_].reset();
    head_ = (head_ + 1) & (slots_.size() - 1);
    if (--size_ == 0) head_ = 0;
  }

  // Destroys every element; the ring keeps its slots.
  void clear() {
    while (size_ > 0) pop_front();
    head_ = 0;
  }

  template <typename Ring, typename Value>
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = Value*;
    using reference = Value&;

    Iterator() = default;
    Iterator(Ring* ring, size_t index) : ring_(ring), index_(index) {}
    reference operator*() const {
      return *ring_->slots_[(ring_->head_ + index_) & (ring_->slots_.size() - 1)];
    }
    pointer operator->() const { return &**this; }
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++index_;
      return before;
    }
    bool operator==(const Iterator& other) const { return index_ == other.index_; }

   private:
    Ring* ring_ = nullptr;
    size_t index_ = 0;
  };
  using iterator = Iterator<RingQueue, T>;
  using const_iterator = Iterator<const RingQueue, const T>;

  iterator begin() { return iterator(this, 0); }
  iterator end() { return iterator(this, size_); }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

 private:
  static constexpr size_t kFirstCapacity = 16;

  // Twice the slots (a power of two, so an index wraps with a mask), the elements moved over in
  // order from the front.
  void Grow() {
    std::vector<std::optional<T>> grown(slots_.empty() ? kFirstCapacity : 2 * slots_.size());
    for (size_t i = 0; i < size_; ++i) {
      std::optional<T>& from = slots_[(head_ + i) & (slots_.size() - 1)];
      grown[i].emplace(std::move(*from));
      from.reset();
    }
    slots_ = std::move(grown);
    head_ = 0;
  }

  std::vector<std::optional<T>> slots_;  // size 0 or a power of two
  size_t head_ = 0;                      // the front's slot
  size_t size_ = 0;
};

}  // namespace flashsale::base
