// Python bindings of the pass manager: run named passes or a named pipeline, list them, dump
// after chosen ones.
#include "bindings.h"

#include "ir/pass_manager.h"

#include <pybind11/stl.h>
#include <sstream>

namespace py = pybind11;
using namespace tessera::ir;

namespace tessera::bindings {

void bindPasses(py::module_ &m) {
  m.def("registered", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const PassInfo *p : registeredPasses())
      out.emplace_back(p->name, p->description);
    return out;
  });
  // Runs the passes in order; returns the dumps requested by dump_after as one string.
  m.def(
      "run",
      [](Module &module, const std::vector<std::string> &names,
         const std::vector<std::string> &dumpAfter, bool verifyEach) {
        std::ostringstream dumps;
        PassManagerOptions options;
        options.verifyEach = verifyEach;
        options.dumpAfter.insert(dumpAfter.begin(), dumpAfter.end());
        options.dumpStream = &dumps;
        PassManager pm(options);
        {
          // The core runs no Python: threads compiling other kernels (the autotuner where
          // it cannot fork) overlap with these passes.
          py::gil_scoped_release release;
          for (const auto &name : names)
            pm.add(name);
          pm.run(module);
        }
        return dumps.str();
      },
      py::arg("module"), py::arg("names"), py::arg("dump_after") = std::vector<std::string>(),
      py::arg("verify_each") = true);
  // The registered pipelines: (name, description, [passes], [(option, description)]).
  m.def("pipelines", [] {
    py::list out;
    for (const PipelineInfo *p : registeredPipelines()) {
      std::vector<std::pair<std::string, std::string>> options;
      for (const PipelineOption &option : p->options)
        options.emplace_back(option.name, option.description);
      out.append(py::make_tuple(p->name, p->description, p->passes, options));
    }
    return out;
  });
  // Runs a named pipeline; options: option name -> int, bool or str (set as module
  // attributes by the pipeline). Returns the dumps requested by dump_after as one string.
  m.def(
      "run_pipeline",
      [](Module &module, const std::string &name, const py::dict &options,
         const std::vector<std::string> &dumpAfter) {
        PipelineOptionValues values;
        for (auto [key, value] : options) {
          std::string text = py::isinstance<py::bool_>(value) ? (value.cast<bool>() ? "1" : "0")
                             : py::isinstance<py::int_>(value)
                                 ? std::to_string(value.cast<long long>())
                                 : value.cast<std::string>();
          values[key.cast<std::string>()] = text;
        }
        std::ostringstream dumps;
        PassManagerOptions managerOptions;
        managerOptions.dumpAfter.insert(dumpAfter.begin(), dumpAfter.end());
        managerOptions.dumpStream = &dumps;
        PassManager pm(managerOptions);
        pm.addPipeline(name, values);
        pm.run(module);
        return dumps.str();
      },
      py::arg("module"), py::arg("name"), py::arg("options") = py::dict(),
      py::arg("dump_after") = std::vector<std::string>());
}

} // namespace tessera::bindings
