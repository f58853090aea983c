// Work waiting for capacity, in arrival order, each item with a deadline
// (docs/services.md "Admission"). Both admission queues use it: a service's
// sessions waiting for KV blocks (rpc/session_service.h) and the
// coordinator's requests waiting for a run slot (coordinator/request_queue.h).
//
// The rules it keeps for both:
// - only the oldest waiter may be admitted (PopFront after its owner checked
//   that it fits), so a large request is not overtaken for ever by small ones;
// - a waiter leaves at its deadline wherever it stands (Expire);
// - the line has a length limit; a full line refuses new work at once.
//
// Not thread-safe: the owner serialises every call (a lock or one thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

namespace specserve::rpc {

template <class T>
class WaitQueue {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WaitQueue(size_t capacity) : capacity_(capacity) {}

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  bool full() const { return items_.size() >= capacity_; }
  void set_capacity(size_t capacity) { capacity_ = capacity; }

  // Joins the end of the line. The caller checked full().
  void Push(uint64_t id, Clock::time_point deadline, T item) {
    items_.push_back(Entry{id, deadline, std::move(item)});
  }

  // The oldest waiter, or null.
  T* Front() { return items_.empty() ? nullptr : &items_.front().item; }
  T PopFront() {
    T item = std::move(items_.front().item);
    items_.pop_front();
    return item;
  }

  T* Find(uint64_t id) {
    for (Entry& e : items_) {
      if (e.id == id) return &e.item;
    }
    return nullptr;
  }

  // Removes the waiter `id`; nullopt when it is not waiting (admitted, or
  // gone already).
  std::optional<T> Take(uint64_t id) {
    for (auto it = items_.begin(); it != items_.end(); ++it) {
      if (it->id == id) {
        T item = std::move(it->item);
        items_.erase(it);
        return item;
      }
    }
    return std::nullopt;
  }

  // Removes every waiter whose deadline is at or before `now` and hands it
  // to expire(T&&), oldest first.
  template <class F>
  void Expire(Clock::time_point now, F&& expire) {
    for (auto it = items_.begin(); it != items_.end();) {
      if (it->deadline <= now) {
        T item = std::move(it->item);
        it = items_.erase(it);
        expire(std::move(item));
      } else {
        ++it;
      }
    }
  }

  // Removes every waiter, oldest first, handing each to f(T&&).
  template <class F>
  void TakeAll(F&& f) {
    while (!items_.empty()) f(PopFront());
  }

  // The earliest deadline of any waiter.
  std::optional<Clock::time_point> NextDeadline() const {
    std::optional<Clock::time_point> next;
    for (const Entry& e : items_) {
      if (!next || e.deadline < *next) next = e.deadline;
    }
    return next;
  }

 private:
  struct Entry {
    uint64_t id;
    Clock::time_point deadline;
    T item;
  };
  size_t capacity_;
  std::deque<Entry> items_;
};

}  // namespace specserve::rpc
