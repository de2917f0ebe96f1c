// Python bindings: module _tiledsl_sim. Converts Python instruction tuples to InstrSpec (type
// checks only; the engine validates values) and the Report to a dict.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine.hpp"
#include "errors.hpp"

namespace py = pybind11;
using tsim::InstrSpec;

namespace {

[[noreturn]] void bad(std::size_t index, const std::string& msg) {
    throw py::value_error("instruction " + std::to_string(index) + ": " + msg);
}

std::string type_name(py::handle h) { return py::str(py::type::handle_of(h).attr("__name__")); }

std::int64_t as_int(py::handle h, std::size_t index, const char* field) {
    // Integers (and NumPy integers, anything with __index__); not floats, not bools.
    if (PyBool_Check(h.ptr()) || !PyIndex_Check(h.ptr()))
        bad(index, std::string(field) + " must be an int, got " + type_name(h));
    py::object v = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
    if (!v) throw py::error_already_set();
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
    if (overflow) bad(index, std::string(field) + " is out of range");
    if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
    return static_cast<std::int64_t>(x);
}

double as_float(py::handle h, std::size_t index, const char* field) {
    if (PyBool_Check(h.ptr()) || !(PyFloat_Check(h.ptr()) || PyIndex_Check(h.ptr()) ||
                                   PyNumber_Check(h.ptr())))
        bad(index, std::string(field) + " must be a number, got " + type_name(h));
    double x = PyFloat_AsDouble(h.ptr());
    if (x == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        bad(index, std::string(field) + " must be a number, got " + type_name(h));
    }
    return x;
}

std::vector<std::int64_t> as_ids(py::handle h, std::size_t index, const char* field) {
    if (!(py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)))
        bad(index, std::string(field) + " must be a list of ints, got " + type_name(h));
    std::vector<std::int64_t> out;
    for (py::handle x : py::reinterpret_borrow<py::sequence>(h)) out.push_back(as_int(x, index, field));
    return out;
}

InstrSpec parse_instr(py::handle item, std::size_t index) {
    if (!(py::isinstance<py::tuple>(item) || py::isinstance<py::list>(item)))
        bad(index, "expected a tuple, got " + type_name(item));
    py::sequence t = py::reinterpret_borrow<py::sequence>(item);
    const std::size_t n = t.size();
    if (n == 0) bad(index, "empty tuple");
    InstrSpec s;
    const std::int64_t op = as_int(t[0], index, "opcode");
    std::size_t arity = 0;  // fields after the opcode
    switch (op) {
        case tsim::ACQUIRE: case tsim::RELEASE: case tsim::COMPUTE: case tsim::LOOP: arity = 2; break;
        case tsim::TRANSFER: arity = 5; break;
        default:
            bad(index, "unknown opcode " + std::to_string(op) +
                           " (expected ACQUIRE=0, RELEASE=1, COMPUTE=2, TRANSFER=3, LOOP=4)");
    }
    s.op = static_cast<int>(op);
    const char* name = tsim::op_name(s.op);
    if (n != arity + 1 && n != arity + 2)
        bad(index, std::string(name) + " takes " + std::to_string(arity) + " fields (+1 start cycle "
                   "in static mode), got " + std::to_string(n - 1));
    switch (s.op) {
        case tsim::ACQUIRE:
        case tsim::RELEASE:
            s.sem = as_int(t[1], index, "sem");
            s.n = as_int(t[2], index, "n");
            break;
        case tsim::COMPUTE:
            s.cycles = as_float(t[1], index, "cycles");
            s.macs = as_int(t[2], index, "macs");
            break;
        case tsim::TRANSFER:
            s.bytes = as_int(t[1], index, "bytes");
            s.overhead = as_float(t[2], index, "overhead");
            s.latency = as_float(t[3], index, "latency");
            s.links = as_ids(t[4], index, "links");
            s.drams = as_ids(t[5], index, "drams");
            break;
        case tsim::LOOP:
            s.count = as_int(t[1], index, "count");
            s.body_len = as_int(t[2], index, "body_len");
            break;
    }
    if (n == arity + 2) {
        s.has_start = true;
        s.start = as_float(t[arity + 1], index, "start cycle");
    }
    return s;
}

py::dict to_dict(const tsim::Report& r, bool trace) {
    py::dict d;
    d["cycles"] = r.cycles;
    d["events"] = r.events;
    d["macs"] = r.macs;
    py::list agents;
    for (const auto& a : r.agents) {
        py::dict x;
        x["name"] = a.name;
        x["busy"] = a.busy;
        x["stall"] = a.stall;
        x["finish"] = a.finish;
        agents.append(x);
    }
    d["agents"] = agents;
    auto resources = [](const std::vector<tsim::ResourceReport>& v) {
        py::list out;
        for (const auto& res : v) {
            py::dict x;
            x["name"] = res.name;
            x["bytes"] = res.bytes;
            x["busy"] = res.busy;
            out.append(x);
        }
        return out;
    };
    d["links"] = resources(r.links);
    d["drams"] = resources(r.drams);
    if (trace) {
        py::str kinds[3] = {py::str("compute"), py::str("transfer"), py::str("stall")};
        py::list t(r.trace.size());
        for (std::size_t i = 0; i < r.trace.size(); ++i) {
            const auto& e = r.trace[i];
            t[i] = py::make_tuple(e.agent, kinds[static_cast<int>(e.kind)], e.start, e.end, e.amount);
        }
        d["trace"] = t;
    }
    return d;
}

}  // namespace

PYBIND11_MODULE(_tiledsl_sim, m) {
    m.doc() = "Deterministic discrete-event simulator core of a spatial dataflow accelerator "
              "(agents, counting semaphores, NoC links, DRAM channels). See csrc/README.md.";

    m.attr("ACQUIRE") = static_cast<int>(tsim::ACQUIRE);
    m.attr("RELEASE") = static_cast<int>(tsim::RELEASE);
    m.attr("COMPUTE") = static_cast<int>(tsim::COMPUTE);
    m.attr("TRANSFER") = static_cast<int>(tsim::TRANSFER);
    m.attr("LOOP") = static_cast<int>(tsim::LOOP);

    py::register_exception<tsim::DeadlockError>(m, "DeadlockError", PyExc_RuntimeError);
    py::register_exception<tsim::ScheduleError>(m, "ScheduleError", PyExc_RuntimeError);

    py::class_<tsim::Simulator>(m, "Simulator")
        .def(py::init<>())
        .def("add_link", &tsim::Simulator::add_link, py::arg("name"), py::arg("bytes_per_cycle"),
             "Add one direction of a NoC link; returns its link id.")
        .def("add_dram", &tsim::Simulator::add_dram, py::arg("name"), py::arg("bytes_per_cycle"),
             "Add a DRAM channel (a bandwidth resource); returns its dram id.")
        .def("add_semaphore", &tsim::Simulator::add_semaphore, py::arg("name"),
             py::arg("initial"), py::arg("maximum"),
             "Add a counting semaphore; returns its id.")
        .def("add_agent", &tsim::Simulator::add_agent, py::arg("name"),
             "Add a sequential agent (DMA engine or compute core); returns its id.")
        .def(
            "set_program",
            [](tsim::Simulator& self, int agent, py::sequence program) {
                if (py::isinstance<py::str>(program))
                    throw py::value_error("program must be a list of instruction tuples");
                std::vector<InstrSpec> specs;
                specs.reserve(program.size());
                std::size_t i = 0;
                for (py::handle item : program) specs.push_back(parse_instr(item, i++));
                self.set_program(agent, specs);
            },
            py::arg("agent"), py::arg("program"),
            "Set an agent's program: a list of instruction tuples (see csrc/README.md).")
        .def(
            "run",
            [](tsim::Simulator& self, std::int64_t packet_bytes, bool static_, bool trace,
               std::int64_t max_events, std::int64_t max_trace) {
                tsim::RunOptions o;
                o.packet_bytes = packet_bytes;
                o.static_schedule = static_;
                o.trace = trace;
                o.max_events = max_events;
                o.max_trace = max_trace;
                o.poll = [] {
                    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
                };
                return to_dict(self.run(o), trace);
            },
            py::arg("packet_bytes") = 2048, py::arg("static") = false, py::arg("trace") = false,
            py::arg("max_events") = 1000000000LL, py::arg("max_trace") = 10000000LL,
            "Run the simulation; returns a report dict.")
        .def_property_readonly("num_agents", &tsim::Simulator::num_agents)
        .def_property_readonly("num_links", &tsim::Simulator::num_links)
        .def_property_readonly("num_drams", &tsim::Simulator::num_drams)
        .def_property_readonly("num_semaphores", &tsim::Simulator::num_semaphores);
}
