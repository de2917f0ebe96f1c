// The event queue: a binary heap ordered by (time, priority, sequence number). The sequence
// number is global and strictly increasing, so the order is total and every run of the same
// input processes events in the same order (bit-identical results).
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace tsim {

enum class EventType : std::uint8_t {
    Step,    // the agent continues executing its program
    Packet,  // the agent's transfer injects its next packet
};

// Priority at equal time: 0 runs first. Events whose next instruction is an ACQUIRE get 1, so
// that releases at a given cycle are seen by acquires at the same cycle.
struct Event {
    double time;
    std::uint64_t order;  // (priority << 62) | sequence
    std::int32_t agent;
    EventType type;

    std::uint32_t priority() const { return static_cast<std::uint32_t>(order >> 62); }
};

struct EventLater {
    bool operator()(const Event& a, const Event& b) const {
        if (a.time != b.time) return a.time > b.time;
        return a.order > b.order;
    }
};

class EventQueue {
public:
    void clear() {
        heap_ = {};
        seq_ = 0;
    }
    void reserve(std::size_t n) {
        std::vector<Event> v;
        v.reserve(n);
        heap_ = std::priority_queue<Event, std::vector<Event>, EventLater>(EventLater{}, std::move(v));
    }
    void push(double time, std::uint32_t priority, std::int32_t agent, EventType type) {
        heap_.push(Event{time, (static_cast<std::uint64_t>(priority) << 62) | seq_++, agent, type});
    }
    bool empty() const { return heap_.empty(); }
    const Event& top() const { return heap_.top(); }
    Event pop() {
        Event e = heap_.top();
        heap_.pop();
        return e;
    }

private:
    std::priority_queue<Event, std::vector<Event>, EventLater> heap_;
    std::uint64_t seq_ = 0;
};

}  // namespace tsim
