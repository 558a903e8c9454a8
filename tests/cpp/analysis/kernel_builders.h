// Hand-built tile IR kernels (as the front end emits them: no layouts) shared by the tests of
// axis info and of the layout passes: vector add, a 2D tile copy, a loop over K.
#pragma once

#include "ir/builder.h"
#include "ir/ir.h"

#include <string>
#include <vector>

namespace tessera::testing {

using namespace tessera::ir;

/// A module with one func under construction; ops go to the end of its body (or of the
/// block set with `into`).
class KernelBuilder {
public:
  KernelBuilder(const std::vector<Type> &argumentTypes, std::vector<int64_t> divisibility,
                int64_t numWarps = 4) {
    module.attributes()["num_warps"] = numWarps;
    Builder top(&module.body());
    func = top.create(OpCode::Func, {}, {},
                      {{"sym_name", std::string("kernel")}, {"divisibility", divisibility}}, 1);
    for (const Type &type : argumentTypes)
      func->body().addArgument(type);
    builder.setInsertionPointToEnd(&func->body());
  }
  KernelBuilder(const KernelBuilder &) = delete;

  Value *arg(unsigned i) { return func->body().argument(i); }
  Operation *create(OpCode code, const std::vector<Value *> &operands,
                    const std::vector<Type> &results, std::map<std::string, Attribute> attrs = {},
                    unsigned regions = 0) {
    return builder.create(code, operands, results, std::move(attrs), regions);
  }
  Value *op(OpCode code, const std::vector<Value *> &operands, Type result,
            std::map<std::string, Attribute> attrs = {}) {
    return create(code, operands, {result}, std::move(attrs))->result();
  }
  Value *constant(int64_t value, Type type = Type::i32()) {
    return op(OpCode::Constant, {}, type, {{"value", value}});
  }
  Value *range(int64_t start, int64_t end) {
    return op(OpCode::MakeRange, {}, Type::tensor({end - start}, Type::i32()),
              {{"start", start}, {"end", end}});
  }
  Value *splat(Value *scalar, std::vector<int64_t> shape) {
    return op(OpCode::Splat, {scalar}, Type::tensor(std::move(shape), scalar->type()));
  }
  Value *expandDims(Value *value, int64_t axis) {
    std::vector<int64_t> shape = value->type().shape();
    shape.insert(shape.begin() + axis, 1);
    return op(OpCode::ExpandDims, {value}, value->type().withShape(shape), {{"axis", axis}});
  }
  Value *broadcast(Value *value, std::vector<int64_t> shape) {
    return op(OpCode::Broadcast, {value}, value->type().withShape(std::move(shape)));
  }
  /// Elementwise op whose result has the type of `a`.
  Value *binary(OpCode code, Value *a, Value *b) { return op(code, {a, b}, a->type()); }
  Value *compare(const std::string &predicate, Value *a, Value *b) {
    return op(OpCode::CmpI, {a, b}, a->type().withElement(Type::i1()),
              {{"predicate", predicate}});
  }
  /// splat(base) + offsets, as a tensor of pointers.
  Value *pointers(Value *base, Value *offsets) {
    Value *bases = splat(base, offsets->type().shape());
    return op(OpCode::AddPtr, {bases, offsets}, bases->type());
  }
  Operation *load(Value *pointers, Value *mask = nullptr) {
    std::vector<Value *> operands{pointers};
    if (mask)
      operands.push_back(mask);
    return create(OpCode::Load, operands,
                  {pointers->type().withElement(pointers->type().elementType().pointee())});
  }
  Operation *store(Value *pointers, Value *value, Value *mask = nullptr) {
    std::vector<Value *> operands{pointers, value};
    if (mask)
      operands.push_back(mask);
    return create(OpCode::Store, operands, {});
  }
  void finish() { create(OpCode::Return, {}, {}); }

  Module module;
  Operation *func = nullptr;
  Builder builder;
};

struct VectorAdd {
  Value *offsets, *mask, *xPointers;
  Operation *loadX, *loadY, *store;
};

/// out[i] = x[i] + y[i] for i < n: the vector add of Triton's first tutorial.
/// Arguments: x, y, out (ptr<element>), n (i32), with the given divisibility hints.
inline VectorAdd buildVectorAdd(KernelBuilder &k, ScalarKind element, int64_t block) {
  VectorAdd add{};
  Value *pid = k.op(OpCode::ProgramId, {}, Type::i32(), {{"axis", int64_t(0)}});
  Value *start = k.binary(OpCode::MulI, pid, k.constant(block));
  add.offsets = k.binary(OpCode::AddI, k.splat(start, {block}), k.range(0, block));
  add.mask = k.compare("slt", add.offsets, k.splat(k.arg(3), {block}));
  add.xPointers = k.pointers(k.arg(0), add.offsets);
  add.loadX = k.load(add.xPointers, add.mask);
  add.loadY = k.load(k.pointers(k.arg(1), add.offsets), add.mask);
  OpCode addCode = isFloatKind(element) ? OpCode::AddF : OpCode::AddI;
  Value *sum = k.binary(addCode, add.loadX->result(), add.loadY->result());
  add.store = k.store(k.pointers(k.arg(2), add.offsets), sum, add.mask);
  k.finish();
  return add;
}

inline std::vector<Type> vectorAddArguments(ScalarKind element) {
  Type pointer = Type::pointer(Type::scalar(element));
  return {pointer, pointer, pointer, Type::i32()};
}

struct TileCopy {
  Value *offsets, *mask, *inPointers;
  Operation *load, *store;
};

/// out[m, n] = in[m, n] over an M x N tile at row stride `stride`, masked by m < M, n < N:
/// the `offs_m[:, None] * stride + offs_n[None, :]` pattern. Arguments: in, out, stride, M, N.
inline TileCopy buildTileCopy(KernelBuilder &k, int64_t rows, int64_t cols) {
  TileCopy copy{};
  Value *offsetsM = k.range(0, rows), *offsetsN = k.range(0, cols);
  Value *column = k.expandDims(offsetsM, 1), *row = k.expandDims(offsetsN, 0);
  Value *rowStarts = k.binary(OpCode::MulI, column, k.splat(k.arg(2), {rows, 1}));
  copy.offsets = k.binary(OpCode::AddI, k.broadcast(rowStarts, {rows, cols}),
                          k.broadcast(row, {rows, cols}));
  Value *maskM = k.compare("slt", column, k.splat(k.arg(3), {rows, 1}));
  Value *maskN = k.compare("slt", row, k.splat(k.arg(4), {1, cols}));
  copy.mask = k.binary(OpCode::AndI, k.broadcast(maskM, {rows, cols}),
                       k.broadcast(maskN, {rows, cols}));
  copy.inPointers = k.pointers(k.arg(0), copy.offsets);
  copy.load = k.load(copy.inPointers, copy.mask);
  copy.store = k.store(k.pointers(k.arg(1), copy.offsets), copy.load->result(), copy.mask);
  k.finish();
  return copy;
}

inline std::vector<Type> tileCopyArguments(ScalarKind element) {
  Type pointer = Type::pointer(Type::scalar(element));
  return {pointer, pointer, Type::i32(), Type::i32(), Type::i32()};
}

} // namespace tessera::testing
