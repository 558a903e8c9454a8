// Device-side tensor maps -> PTX (sm_90a; TESSERA_TMA). A kernel that builds a tensor
// descriptor encodes its TMA map itself, as Triton does, into global scratch:
//
//   global_scratch {offset}: scratch + program * global_scratch + offset, where scratch is the
//     kernel's last parameter and `program` the linear CTA id (x fastest), so each program
//     owns global_scratch bytes of the launcher's allocation (grid size times that);
//   tensormap_create: the issuing thread (KernelLowering::issuer, one elected thread of warp
//     0) zeroes the 128 bytes (st.global), sets every field
//     the TMA reads with tensormap.replace.tile.*.global (address, rank - 1, box, dims, byte
//     strides, element strides 1, element type, interleave none, swizzle, fill), then makes
//     the writes visible to the tensor-map proxy: fence.proxy.tensormap::generic.release.gpu,
//     and fence.proxy.tensormap::generic.acquire.gpu on the map before its first use.
//
// The copies that use the map are issued by the same thread (lower_tma.cpp), so the writer,
// the fences and the TMA instructions are in one thread's program order: no bar.sync is
// needed between them. Fields no tensormap.replace names (L2 promotion, OOB compute) stay 0.
// PTX ISA >= 8.6 (codegen emits .version 8.6) takes global strides in bytes.
#include "codegen/lower_tensormap.h"

#include "ir/diagnostics.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tessera::codegen {

namespace {

const ir::Operation &enclosingFunc(const ir::Operation &op) {
  const ir::Operation *parent = op.parentOp();
  while (parent != nullptr && parent->code() != ir::OpCode::Func)
    parent = parent->parentOp();
  if (parent == nullptr || !parent->hasAttr("global_scratch"))
    ir::emitError(op, "codegen: global_scratch outside a func with attribute global_scratch");
  return *parent;
}

void lowerGlobalScratch(KernelLowering &lowering, const ir::Operation &op) {
  llvm::IRBuilder<> &b = lowering.builder();
  int64_t perProgram = enclosingFunc(op).intAttr("global_scratch");
  llvm::Function *function = b.GetInsertBlock()->getParent();
  llvm::Value *scratch = function->getArg(function->arg_size() - 1);
  auto read = [&](llvm::Intrinsic::ID id) {
    return b.CreateZExt(lowering.callIntrinsic(id, {}, {}), b.getInt64Ty());
  };
  // x + nx * (y + ny * z): the linear program id, x fastest.
  llvm::Value *program = b.CreateAdd(
      read(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x),
      b.CreateMul(read(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x),
                  b.CreateAdd(read(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y),
                              b.CreateMul(read(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y),
                                          read(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z)))));
  llvm::Value *offset =
      b.CreateAdd(b.CreateMul(program, b.getInt64(static_cast<uint64_t>(perProgram))),
                  b.getInt64(static_cast<uint64_t>(op.intAttr("offset"))));
  lowering.setRegisters(op.result(), {b.CreateGEP(b.getInt8Ty(), scratch, offset)});
}

void lowerTensorMapCreate(KernelLowering &lowering, const ir::Operation &op) {
  if (lowering.smVersion() < 90)
    ir::emitError(op, "codegen: tensormap_create needs sm_90a");
  llvm::IRBuilder<> &b = lowering.builder();
  const std::vector<int64_t> &box = op.arrayAttr("box_dim");
  size_t rank = box.size();
  int64_t elementBytes = op.operand(1)->type().pointee().bitWidth() / 8;
  llvm::Value *map = lowering.registersOf(op.operand(0))[0];
  // $0: the issuing thread or not (the one that copies through the map: lower_tma.cpp), $1:
  // the map, $2: the tensor's address, then the dims and strides.
  std::vector<llvm::Value *> args{b.CreateZExt(lowering.issuer(), b.getInt32Ty()), map,
                                  lowering.registersOf(op.operand(1))[0]};
  std::string constraints = "r,l,l";
  std::string text = "{ .reg .pred p; .reg .b32 z; setp.ne.b32 p, $0, 0; mov.b32 z, 0; ";
  for (int offset = 0; offset < 128; offset += 16)
    text += "@p st.global.v4.b32 [$1+" + std::to_string(offset) + "], {z, z, z, z}; ";
  auto replace = [&](const std::string &field, const std::string &type,
                     const std::string &operands) {
    text += "@p tensormap.replace.tile." + field + ".global.b1024." + type + " [$1], " + operands +
            "; ";
  };
  replace("global_address", "b64", "$2");
  replace("rank", "b32", std::to_string(rank - 1));
  // Operands are outermost first; the map's ordinals count from the innermost dim.
  for (size_t i = 0; i < rank; ++i) {
    replace("box_dim", "b32", std::to_string(i) + ", " + std::to_string(box[i]));
    args.push_back(lowering.registersOf(op.operand(2 + rank - 1 - i))[0]);
    constraints += ",r";
    replace("global_dim", "b32", std::to_string(i) + ", $" + std::to_string(args.size() - 1));
  }
  for (size_t i = 0; i + 1 < rank; ++i) { // the stride of dim i + 1 (innermost first), bytes
    llvm::Value *stride = lowering.registersOf(op.operand(2 + rank + (rank - 2 - i)))[0];
    args.push_back(b.CreateMul(stride, b.getInt64(static_cast<uint64_t>(elementBytes))));
    constraints += ",l";
    replace("global_stride", "b64", std::to_string(i) + ", $" + std::to_string(args.size() - 1));
  }
  for (size_t i = 0; i < rank; ++i)
    replace("element_stride", "b32", std::to_string(i) + ", 1");
  replace("elemtype", "b32", std::to_string(op.intAttr("elem_type")));
  replace("interleave_layout", "b32", "0");
  replace("swizzle_mode", "b32", std::to_string(op.intAttr("swizzle_mode")));
  replace("fill_mode", "b32", std::to_string(op.intAttr("fill_mode")));
  text += "@p fence.proxy.tensormap::generic.release.gpu; "
          "@p fence.proxy.tensormap::generic.acquire.gpu [$1], 128; }";
  std::vector<llvm::Type *> types;
  for (llvm::Value *arg : args)
    types.push_back(arg->getType());
  auto *type = llvm::FunctionType::get(b.getVoidTy(), types, false);
  b.CreateCall(llvm::InlineAsm::get(type, text, constraints + ",~{memory}",
                                    /*hasSideEffects=*/true),
               args);
  lowering.setRegisters(op.result(), {map});
}

} // namespace

bool lowerTensorMapOp(KernelLowering &lowering, const ir::Operation &op) {
  switch (op.code()) {
  case ir::OpCode::GlobalScratch: lowerGlobalScratch(lowering, op); return true;
  case ir::OpCode::TensorMapCreate: lowerTensorMapCreate(lowering, op); return true;
  default: return false;
  }
}

void addGlobalScratchParameter(const ir::Operation &func, llvm::LLVMContext &context,
                               std::vector<llvm::Type *> &paramTypes) {
  if (func.hasAttr("global_scratch"))
    paramTypes.push_back(llvm::PointerType::get(context, 1));
}

} // namespace tessera::codegen
