// Python bindings of the tile IR: types, values, ops, blocks, builder, parser, printer.
// Objects returned to Python are non-owning views into a Module; keep the Module alive.
#include "bindings.h"

#include "ir/builder.h"
#include "ir/diagnostics.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <pybind11/stl.h>

namespace py = pybind11;
using namespace tessera::ir;

namespace tessera::bindings {

namespace {

ScalarKind scalarFromName(const std::string &name) {
  ScalarKind kind;
  if (!parseScalarKind(name, kind))
    throw py::value_error("unknown scalar type '" + name + "'");
  return kind;
}

Attribute toAttribute(const py::handle &obj) {
  if (py::isinstance<py::bool_>(obj))
    return obj.cast<bool>();
  if (py::isinstance<py::int_>(obj))
    return obj.cast<int64_t>();
  if (py::isinstance<py::float_>(obj))
    return obj.cast<double>();
  if (py::isinstance<py::str>(obj))
    return obj.cast<std::string>();
  if (py::isinstance<Type>(obj))
    return obj.cast<Type>();
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj))
    return obj.cast<std::vector<int64_t>>();
  throw py::type_error("unsupported attribute value: " + py::repr(obj).cast<std::string>());
}

py::object fromAttribute(const Attribute &attr) {
  return std::visit([](const auto &v) -> py::object { return py::cast(v); }, attr);
}

std::map<std::string, Attribute> toAttributes(const py::dict &attrs) {
  std::map<std::string, Attribute> out;
  for (auto [key, value] : attrs)
    out[key.cast<std::string>()] = toAttribute(value);
  return out;
}

py::dict attributeDict(const std::map<std::string, Attribute> &attrs) {
  py::dict d;
  for (auto &[key, value] : attrs)
    d[py::str(key)] = fromAttribute(value);
  return d;
}

OpCode opFromName(const std::string &name) {
  OpCode code;
  if (!parseOpName(name, code))
    throw py::value_error("unknown tile IR op '" + name + "'");
  return code;
}

template <typename T> std::vector<T *> rawList(const std::vector<std::unique_ptr<T>> &items) {
  std::vector<T *> out;
  for (auto &item : items)
    out.push_back(item.get());
  return out;
}

} // namespace

void bindIR(py::module_ &m) {
  py::register_exception<CompileError>(m, "CompileError", PyExc_RuntimeError);
  const auto ref = py::return_value_policy::reference;

  py::class_<Type>(m, "Type")
      .def_property_readonly("kind",
                             [](const Type &t) {
                               switch (t.kind()) {
                               case Type::Kind::Scalar: return "scalar";
                               case Type::Kind::Pointer: return "pointer";
                               case Type::Kind::Tensor: return "tensor";
                               default: return "none";
                               }
                             })
      .def("is_scalar", &Type::isScalar)
      .def("is_pointer", &Type::isPointer)
      .def("is_tensor", &Type::isTensor)
      .def("is_integer", &Type::isInteger)
      .def("is_float", &Type::isFloat)
      .def_property_readonly("element_type", &Type::elementType)
      .def_property_readonly(
          "scalar_name", [](const Type &t) { return std::string(scalarKindName(t.scalarKind())); })
      .def_property_readonly("bit_width", &Type::bitWidth)
      .def_property_readonly("pointee", &Type::pointee)
      .def_property_readonly("address_space", &Type::addressSpace)
      .def_property_readonly("shape", &Type::shape)
      .def_property_readonly("rank", &Type::rank)
      .def_property_readonly("has_encoding", [](const Type &t) { return bool(t.encoding()); })
      .def_property_readonly(
          "encoding_str",
          [](const Type &t) { return t.encoding() ? t.encoding()->str() : std::string(); })
      .def("with_element", &Type::withElement)
      .def("with_shape", &Type::withShape)
      .def("without_encoding", [](const Type &t) { return t.withEncoding(nullptr); })
      .def("__eq__", [](const Type &a, const Type &b) { return a == b; })
      .def("__hash__", [](const Type &t) { return std::hash<std::string>()(t.str()); })
      .def("__str__", &Type::str)
      .def("__repr__", [](const Type &t) { return "ir.Type(" + t.str() + ")"; });

  m.def("scalar", [](const std::string &name) { return Type::scalar(scalarFromName(name)); });
  m.def("pointer", &Type::pointer, py::arg("pointee"), py::arg("address_space") = 1);
  m.def("tensor", [](std::vector<int64_t> shape, Type element) {
    return Type::tensor(std::move(shape), element);
  });

  py::class_<Value>(m, "Value")
      .def_property_readonly("type", &Value::type)
      .def("set_type", &Value::setType)
      .def_property_readonly("defining_op", &Value::definingOp, ref)
      .def_property_readonly("owner_block", &Value::ownerBlock, ref)
      .def_property_readonly("index", &Value::index)
      .def_property_readonly("users", &Value::users, ref)
      .def_property_readonly("id", [](const Value &v) { return reinterpret_cast<uintptr_t>(&v); })
      .def("replace_all_uses_with", &Value::replaceAllUsesWith)
      .def("__hash__", [](const Value &v) { return reinterpret_cast<uintptr_t>(&v); })
      .def("__eq__", [](const Value &a, const Value &b) { return &a == &b; });

  py::class_<Block>(m, "Block")
      .def_property_readonly(
          "arguments", [](const Block &b) { return rawList(b.arguments()); }, ref)
      .def("add_argument", &Block::addArgument, ref)
      .def_property_readonly(
          "operations",
          [](const Block &b) {
            std::vector<Operation *> ops;
            for (auto &op : b.operations())
              ops.push_back(op.get());
            return ops;
          },
          ref)
      .def_property_readonly("parent_op", &Block::parentOp, ref)
      .def_property_readonly("terminator", &Block::terminator, ref);

  py::class_<Operation>(m, "Operation")
      .def_property_readonly("name", [](const Operation &op) { return std::string(op.name()); })
      .def_property_readonly("operands", &Operation::operands, ref)
      .def_property_readonly(
          "results", [](const Operation &op) { return rawList(op.results()); }, ref)
      .def("result", &Operation::result, ref, py::arg("index") = 0)
      .def_property_readonly("attrs",
                             [](const Operation &op) { return attributeDict(op.attributes()); })
      .def("attr",
           [](const Operation &op, const std::string &k) { return fromAttribute(op.attr(k)); })
      .def("set_attr",
           [](Operation &op, const std::string &k, py::handle v) { op.setAttr(k, toAttribute(v)); })
      .def_property_readonly("num_regions", &Operation::numRegions)
      .def(
          "body", [](Operation &op, unsigned i) { return &op.body(i); }, ref, py::arg("region") = 0)
      .def_property_readonly("location", &Operation::location)
      .def_property_readonly("parent_block", &Operation::parentBlock, ref)
      .def_property_readonly("parent_op", &Operation::parentOp, ref)
      .def("set_operand", &Operation::setOperand)
      .def("set_operands", &Operation::setOperands)
      .def("add_result", &Operation::addResult, ref, py::arg("type"))
      .def("erase", &Operation::erase)
      .def("__str__", [](const Operation &op) { return toString(op); });

  py::class_<Module>(m, "Module")
      .def(py::init<>())
      .def_property_readonly(
          "body", [](Module &mod) { return &mod.body(); }, ref)
      .def("functions", &Module::functions, ref)
      .def("lookup_function", &Module::lookupFunction, ref)
      .def_property_readonly("attrs",
                             [](const Module &mod) { return attributeDict(mod.attributes()); })
      .def("set_attr", [](Module &mod, const std::string &k,
                          py::handle v) { mod.attributes()[k] = toAttribute(v); })
      .def("clone", &Module::clone)
      .def("verify", [](const Module &mod) { verify(mod); })
      .def(
          "str",
          [](const Module &mod, bool locations, bool aliases) {
            return toString(mod, PrintOptions{locations, aliases});
          },
          py::arg("locations") = false, py::arg("aliases") = true)
      .def("__str__", [](const Module &mod) { return toString(mod); });

  m.def("parse_module", &parseModule, py::arg("text"));
  m.def(
      "op_names",
      [] {
        std::vector<std::string> names;
        for (size_t i = 0; i < kNumOpCodes; ++i)
          names.push_back(opName(static_cast<OpCode>(i)));
        return names;
      },
      "Every op's mnemonic, in ops.def's order.");
  m.def(
      "verifier_rules",
      [] {
        py::dict rules;
        for (size_t i = 0; i < kNumOpCodes; ++i)
          if (const VerifierRule *rule = verifierRule(static_cast<OpCode>(i)))
            rules[py::str(opName(static_cast<OpCode>(i)))] = rule->name;
        return rules;
      },
      "{op mnemonic: the verifier rule that checks it}, from the verifier's rule table.");
  m.def(
      "ops_without_rule",
      [] {
        py::list ops;
        for (const OpWithoutRule &entry : opsWithoutRule()) {
          py::list layers;
          if (entry.layers & layer::VERIFIER)
            layers.append("verifier");
          if (entry.layers & layer::LOWERING)
            layers.append("lowering");
          if (entry.layers & layer::INTERPRETER)
            layers.append("interpreter");
          ops.append(py::make_tuple(opName(entry.code), layers, entry.reason));
        }
        return ops;
      },
      "ops.def's NO_RULE entries: (op mnemonic, [layers without a rule of their own], why).");

  py::class_<Builder>(m, "Builder")
      .def(py::init<>())
      .def("set_insertion_point_to_end", &Builder::setInsertionPointToEnd)
      .def("set_insertion_point", &Builder::setInsertionPoint)
      .def("set_insertion_point_after", &Builder::setInsertionPointAfter)
      .def_property_readonly("insertion_block", &Builder::insertionBlock, ref)
      .def("set_location", &Builder::setLocation)
      .def(
          "create",
          [](Builder &b, const std::string &name, const std::vector<Value *> &operands,
             const std::vector<Type> &resultTypes, const py::dict &attrs, unsigned numRegions) {
            return b.create(opFromName(name), operands, resultTypes, toAttributes(attrs),
                            numRegions);
          },
          ref, py::arg("name"), py::arg("operands"), py::arg("result_types"),
          py::arg("attrs") = py::dict(), py::arg("num_regions") = 0);
}

} // namespace tessera::bindings
