// Python bindings of the pass manager: run named passes, list them, dump after chosen ones.
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
  m.def("run",
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
}

} // namespace tessera::bindings
