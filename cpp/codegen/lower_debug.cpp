// Lowers the debugging ops to the CUDA device runtime's entry points, which ptxas resolves:
//
//   print %x {prefix = " x: ", hex = false, is_signed = [0]} : (tensor<128xf32, #blocked>) -> ()
// becomes, for each register r this thread owns (duplicates print once),
//   vprintf("pid (%u, %u, %u) idx (%3u) x: %f\n", {ctaid.x, ctaid.y, ctaid.z, i_r, (double)x_r})
// and
//   assert %ok {message = "m"} : (tensor<128xi1, #blocked>) -> ()
// becomes: if (!(ok_0 & ok_1 & ...)) __assertfail("m", file, line, "kernel", 1).
//
// The format is the interpreter's (interpreter/debug.py) and Triton's; scalars and the
// prefix-only form print from thread 0 alone, so each element prints once per program.
#include "codegen/lower_debug.h"

#include "ir/diagnostics.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <cmath>
#include <map>

namespace tessera::codegen {

namespace {

llvm::Module &moduleOf(KernelLowering &lowering) {
  return *lowering.builder().GetInsertBlock()->getModule();
}

/// A pointer in the generic address space (what vprintf and __assertfail take).
llvm::Value *generic(KernelLowering &lowering, llvm::Value *pointer) {
  if (pointer->getType()->getPointerAddressSpace() == 0)
    return pointer;
  return lowering.builder().CreateAddrSpaceCast(pointer,
                                                llvm::PointerType::get(lowering.context(), 0));
}

/// A NUL-terminated constant string in global memory, as a generic pointer.
llvm::Value *stringConstant(KernelLowering &lowering, const std::string &text, const char *name) {
  llvm::GlobalVariable *global =
      lowering.builder().CreateGlobalString(text, name, /*AddressSpace=*/1, &moduleOf(lowering));
  return generic(lowering, global);
}

/// Runs `emit` only where `condition` holds (no condition: always), then continues after.
template <typename Emit>
void emitGuarded(KernelLowering &lowering, llvm::Value *condition, Emit emit) {
  if (!condition) {
    emit();
    return;
  }
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Function *function = b.GetInsertBlock()->getParent();
  auto *then = llvm::BasicBlock::Create(lowering.context(), "debug.then", function);
  auto *end = llvm::BasicBlock::Create(lowering.context(), "debug.end", function);
  b.CreateCondBr(condition, then, end);
  b.SetInsertPoint(then);
  emit();
  b.CreateBr(end);
  b.SetInsertPoint(end);
}

/// One printf operand: the value widened as C's varargs promotion does, and its conversion.
struct FormattedValue {
  llvm::Value *value;
  std::string conversion;
};

FormattedValue formatValue(KernelLowering &lowering, llvm::Value *value, const ir::Type &type,
                           bool isSigned, bool hex, const ir::Operation &op) {
  llvm::IRBuilder<> &b = lowering.builder();
  if (type.elementType().isPointer()) // the address, as C's %p (Triton prints pointers so)
    return {b.CreatePtrToInt(value, b.getInt64Ty()), "%p"};
  ir::ScalarKind kind = type.elementType().scalarKind();
  if (ir::isFp8Kind(kind))
    ir::emitError(op, "codegen: device_print of fp8 values is not supported yet");
  int bits = ir::scalarBitWidth(kind);
  bool wide = bits > 32;
  if (hex) { // the bits, zero-padded to the type's hex digits, as the interpreter prints them
    if (value->getType()->isFloatingPointTy())
      value = b.CreateBitCast(value, b.getIntNTy(bits));
    value = b.CreateZExt(value, wide ? b.getInt64Ty() : b.getInt32Ty());
    return {value, "0x%0" + std::to_string(bits / 4) + (wide ? "llx" : "x")};
  }
  if (ir::isFloatKind(kind))
    return {b.CreateFPExt(value, b.getDoubleTy()), "%f"};
  if (wide)
    return {value, isSigned ? "%lli" : "%llu"};
  isSigned = isSigned && kind != ir::ScalarKind::I1; // i1 prints 0 or 1
  value = isSigned ? b.CreateSExt(value, b.getInt32Ty()) : b.CreateZExt(value, b.getInt32Ty());
  return {value, isSigned ? "%i" : "%u"};
}

/// printf's '%' must be doubled in text that is not a conversion.
std::string escapePercent(const std::string &text) {
  std::string out;
  for (char c : text)
    out += c == '%' ? std::string("%%") : std::string(1, c);
  return out;
}

class Printer {
public:
  Printer(KernelLowering &lowering, const ir::Operation &op) : lowering_(lowering), op_(op) {
    llvm::IRBuilder<> &b = lowering.builder();
    llvm::Type *i32 = b.getInt32Ty();
    auto *type = llvm::FunctionType::get(i32, {b.getPtrTy(), b.getPtrTy()}, false);
    vprintf_ = moduleOf(lowering).getOrInsertFunction("vprintf", type);
    static const llvm::Intrinsic::ID ctaIds[] = {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                                                 llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                                 llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z};
    for (llvm::Intrinsic::ID id : ctaIds)
      pid_.push_back(lowering.callIntrinsic(id, {}, {}));
  }

  /// vprintf(format, &{pid, args...}); the argument buffer follows C's layout (natural
  /// alignment), which is what vprintf reads.
  void print(const std::string &text, const std::vector<llvm::Value *> &args) {
    llvm::IRBuilder<> &b = lowering_.builder();
    std::vector<llvm::Value *> values(pid_.begin(), pid_.end());
    values.insert(values.end(), args.begin(), args.end());
    std::vector<llvm::Type *> types;
    for (llvm::Value *value : values)
      types.push_back(value->getType());
    auto *bufferType = llvm::StructType::get(lowering_.context(), types);
    llvm::Function *function = b.GetInsertBlock()->getParent();
    llvm::IRBuilder<> entry(&function->getEntryBlock(), function->getEntryBlock().begin());
    llvm::Value *buffer = entry.CreateAlloca(bufferType);
    for (unsigned i = 0; i < values.size(); ++i)
      b.CreateStore(values[i], b.CreateStructGEP(bufferType, buffer, i));
    llvm::Value *&format = formats_[text]; // a constant: usable from any block
    if (!format)
      format = stringConstant(lowering_, "pid (%u, %u, %u)" + text + "\n", "printf_format");
    b.CreateCall(vprintf_, {format, generic(lowering_, buffer)});
  }

  void printOperand(unsigned index, const std::string &prefix, bool hex, bool isSigned,
                    bool several) {
    const ir::Value *value = op_.operand(index);
    const ir::Type &type = value->type();
    const Registers &registers = lowering_.registersOf(value);
    std::string tail =
        escapePercent(prefix) + (several ? "(operand " + std::to_string(index) + ") " : "");
    if (!type.isTensor()) {
      FormattedValue formatted = formatValue(lowering_, registers[0], type, isSigned, hex, op_);
      emitGuarded(lowering_, firstThread(),
                  [&] { print(" idx ()" + tail + formatted.conversion, {formatted.value}); });
      return;
    }
    const LinearLayout &layout = lowering_.layoutOf(type, op_);
    std::vector<std::vector<llvm::Value *>> indices = lowering_.emitIndices(layout);
    int32_t duplicates = KernelLowering::duplicateRegisterMask(layout);
    std::string idx = " idx (";
    for (size_t dim = 0; dim < type.shape().size(); ++dim) {
      int64_t extent = type.shape()[dim];
      int width = extent > 1 ? static_cast<int>(std::ceil(std::log10(double(extent)))) : 0;
      idx += (dim ? ", %" : "%") + (width ? std::to_string(width) : std::string()) + "u";
    }
    idx += ")";
    emitGuarded(lowering_, lowering_.emitOwnerPredicate(layout), [&] {
      for (size_t r = 0; r < registers.size(); ++r) {
        if (static_cast<int32_t>(r) & duplicates)
          continue;
        FormattedValue formatted = formatValue(lowering_, registers[r], type, isSigned, hex, op_);
        std::vector<llvm::Value *> args(indices[r].begin(), indices[r].end());
        args.push_back(formatted.value);
        print(idx + tail + formatted.conversion, args);
      }
    });
  }

  void printText(const std::string &prefix) {
    emitGuarded(lowering_, firstThread(), [&] { print(escapePercent(prefix), {}); });
  }

private:
  llvm::Value *firstThread() {
    return lowering_.builder().CreateICmpEQ(lowering_.threadId(), lowering_.i32(0));
  }

  KernelLowering &lowering_;
  const ir::Operation &op_;
  llvm::FunctionCallee vprintf_;
  std::vector<llvm::Value *> pid_;
  std::map<std::string, llvm::Value *> formats_;
};

void lowerPrint(KernelLowering &lowering, const ir::Operation &op) {
  std::string prefix = op.stringAttr("prefix");
  bool hex = op.hasAttr("hex") && std::get<bool>(op.attr("hex"));
  std::vector<int64_t> isSigned(op.numOperands(), 0);
  if (op.hasAttr("is_signed"))
    isSigned = op.arrayAttr("is_signed");
  Printer printer(lowering, op);
  if (op.numOperands() == 0)
    printer.printText(prefix);
  for (unsigned i = 0; i < op.numOperands(); ++i)
    printer.printOperand(i, prefix, hex, isSigned[i] != 0, op.numOperands() > 1);
}

/// The file and line of a "file:line:col" location ("<unknown>", 0 when absent).
std::pair<std::string, int64_t> fileAndLine(const std::string &location) {
  size_t col = location.rfind(':');
  size_t line = col == std::string::npos ? col : location.rfind(':', col - 1);
  if (line == std::string::npos)
    return {"<unknown>", 0};
  return {location.substr(0, line), std::stoll(location.substr(line + 1, col - line - 1))};
}

void lowerAssert(KernelLowering &lowering, const ir::Operation &op) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Value *holds = nullptr; // the thread's elements, all of them (duplicates agree)
  for (llvm::Value *element : lowering.registersOf(op.operand(0)))
    holds = holds ? b.CreateAnd(holds, element) : element;
  std::string message = op.stringAttr("message");
  emitAssertFailure(lowering, b.CreateNot(holds), message.empty() ? "device_assert" : message,
                    op.location());
}

} // namespace

void emitAssertFailure(KernelLowering &lowering, llvm::Value *failed, const std::string &message,
                       const std::string &location) {
  llvm::IRBuilder<> &b = lowering.builder();
  auto [file, line] = fileAndLine(location);
  std::string kernel = b.GetInsertBlock()->getParent()->getName().str();
  llvm::Type *ptr = b.getPtrTy();
  auto *type = llvm::FunctionType::get(b.getVoidTy(),
                                       {ptr, ptr, b.getInt32Ty(), ptr, b.getInt64Ty()}, false);
  llvm::FunctionCallee assertFail = moduleOf(lowering).getOrInsertFunction("__assertfail", type);
  emitGuarded(lowering, failed, [&] {
    b.CreateCall(assertFail, {stringConstant(lowering, message, "assert_msg"),
                              stringConstant(lowering, file, "assert_file"),
                              b.getInt32(static_cast<uint32_t>(line)),
                              stringConstant(lowering, kernel, "assert_func"), b.getInt64(1)});
  });
}

void lowerDebugOp(KernelLowering &lowering, const ir::Operation &op) {
  switch (op.code()) {
  case ir::OpCode::Print: return lowerPrint(lowering, op);
  case ir::OpCode::Assert: return lowerAssert(lowering, op);
  default: ir::emitError(op, std::string("codegen: no debug lowering for op '") + op.name() + "'");
  }
}

} // namespace tessera::codegen
