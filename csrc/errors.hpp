// Exceptions thrown by the simulator core. The core never asserts or exits: every problem is an
// exception, which the Python bindings turn into a Python exception.
//   std::invalid_argument -> ValueError     (bad ids, bad instruction fields)
//   std::runtime_error    -> RuntimeError   (max_events exceeded, semaphore overflow)
//   DeadlockError         -> _tiledsl_sim.DeadlockError (a RuntimeError)
//   ScheduleError         -> _tiledsl_sim.ScheduleError (a RuntimeError)
#pragma once

#include <stdexcept>
#include <string>

namespace tsim {

class DeadlockError : public std::runtime_error {
public:
    explicit DeadlockError(const std::string& msg) : std::runtime_error(msg) {}
};

class ScheduleError : public std::runtime_error {
public:
    explicit ScheduleError(const std::string& msg) : std::runtime_error(msg) {}
};

}  // namespace tsim
