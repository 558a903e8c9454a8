// Tests for the software pipeliner's schedule (cpp/transforms/pipeline/schedule.h) on a matmul
// loop after the layout passes: which loads become rings, the ahead slice and carried values,
// the stage table, the depth asked for, and the reasons a loop is left alone.
#include "ir/parser.h"
#include "ir/pass_manager.h"
#include "transforms/pipeline/schedule.h"

#include <gtest/gtest.h>

#include <string>

using namespace tessera;
using namespace tessera::ir;
using namespace tessera::transforms::pipeline;

namespace {

// A 64 x 64 x K matmul loop (the front end's IR for tl.load / tl.dot / pointer increments).
const char *kMatmulLoop = R"IR(
module {num_warps = 4} {
  func @matmul_loop(%0: ptr<f16>, %1: ptr<f16>, %2: ptr<f32>, %3: i32) {divisibility = [16, 16, 16, 16]} {
    %4 = make_range {end = 64, start = 0} : () -> tensor<64xi32>
    %5 = make_range {end = 32, start = 0} : () -> tensor<32xi32>
    %6 = expand_dims %4 {axis = 1} : (tensor<64xi32>) -> tensor<64x1xi32>
    %7 = splat %3 : (i32) -> tensor<64x1xi32>
    %8 = muli %6, %7 : (tensor<64x1xi32>, tensor<64x1xi32>) -> tensor<64x1xi32>
    %9 = splat %0 : (ptr<f16>) -> tensor<64x1xptr<f16>>
    %10 = addptr %9, %8 : (tensor<64x1xptr<f16>>, tensor<64x1xi32>) -> tensor<64x1xptr<f16>>
    %11 = expand_dims %5 {axis = 0} : (tensor<32xi32>) -> tensor<1x32xi32>
    %12 = broadcast %10 : (tensor<64x1xptr<f16>>) -> tensor<64x32xptr<f16>>
    %13 = broadcast %11 : (tensor<1x32xi32>) -> tensor<64x32xi32>
    %14 = addptr %12, %13 : (tensor<64x32xptr<f16>>, tensor<64x32xi32>) -> tensor<64x32xptr<f16>>
    %15 = expand_dims %5 {axis = 1} : (tensor<32xi32>) -> tensor<32x1xi32>
    %16 = constant {value = 64} : () -> tensor<32x1xi32>
    %17 = muli %15, %16 : (tensor<32x1xi32>, tensor<32x1xi32>) -> tensor<32x1xi32>
    %18 = splat %1 : (ptr<f16>) -> tensor<32x1xptr<f16>>
    %19 = addptr %18, %17 : (tensor<32x1xptr<f16>>, tensor<32x1xi32>) -> tensor<32x1xptr<f16>>
    %20 = expand_dims %4 {axis = 0} : (tensor<64xi32>) -> tensor<1x64xi32>
    %21 = broadcast %19 : (tensor<32x1xptr<f16>>) -> tensor<32x64xptr<f16>>
    %22 = broadcast %20 : (tensor<1x64xi32>) -> tensor<32x64xi32>
    %23 = addptr %21, %22 : (tensor<32x64xptr<f16>>, tensor<32x64xi32>) -> tensor<32x64xptr<f16>>
    %24 = constant {value = 0.0} : () -> tensor<64x64xf32>
    %25 = constant {value = 0} : () -> i32
    %26 = constant {value = 32} : () -> i32
    %27 = constant {value = 32} : () -> tensor<64x32xi32>
    %28 = constant {value = 2048} : () -> tensor<32x64xi32>
    %29, %30, %31 = for %25, %3, %26, %24, %14, %23 : (i32, i32, i32, tensor<64x64xf32>, tensor<64x32xptr<f16>>, tensor<32x64xptr<f16>>) -> (tensor<64x64xf32>, tensor<64x32xptr<f16>>, tensor<32x64xptr<f16>>) {
    ^bb(%32: i32, %33: tensor<64x64xf32>, %34: tensor<64x32xptr<f16>>, %35: tensor<32x64xptr<f16>>):
      %36 = load %34 : (tensor<64x32xptr<f16>>) -> tensor<64x32xf16>
      %37 = load %35 : (tensor<32x64xptr<f16>>) -> tensor<32x64xf16>
      %38 = dot %36, %37, %33 : (tensor<64x32xf16>, tensor<32x64xf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %39 = addptr %34, %27 : (tensor<64x32xptr<f16>>, tensor<64x32xi32>) -> tensor<64x32xptr<f16>>
      %40 = addptr %35, %28 : (tensor<32x64xptr<f16>>, tensor<32x64xi32>) -> tensor<32x64xptr<f16>>
      yield %38, %39, %40 : (tensor<64x64xf32>, tensor<64x32xptr<f16>>, tensor<32x64xptr<f16>>) -> ()
    }
    %41 = constant {value = 64} : () -> tensor<64x1xi32>
    %42 = muli %6, %41 : (tensor<64x1xi32>, tensor<64x1xi32>) -> tensor<64x1xi32>
    %43 = splat %2 : (ptr<f32>) -> tensor<64x1xptr<f32>>
    %44 = addptr %43, %42 : (tensor<64x1xptr<f32>>, tensor<64x1xi32>) -> tensor<64x1xptr<f32>>
    %45 = broadcast %44 : (tensor<64x1xptr<f32>>) -> tensor<64x64xptr<f32>>
    %46 = broadcast %20 : (tensor<1x64xi32>) -> tensor<64x64xi32>
    %47 = addptr %45, %46 : (tensor<64x64xptr<f32>>, tensor<64x64xi32>) -> tensor<64x64xptr<f32>>
    store %47, %29 : (tensor<64x64xptr<f32>>, tensor<64x64xf32>) -> ()
    return : () -> ()
  }
}

)IR";

std::unique_ptr<Module> layoutAssigned(std::string text) {
  std::unique_ptr<Module> module = parseModule(text);
  PassManager passes;
  for (const char *name : {"assign_layouts", "coalesce", "accelerate_matmul",
                           "remove_layout_conversions", "canonicalize", "cse", "dce"})
    passes.add(name);
  passes.run(*module);
  return module;
}

Operation *firstLoop(Module &module) {
  Operation *loop = nullptr;
  module.walk([&](Operation *op) {
    if (!loop && op->code() == OpCode::For)
      loop = op;
  });
  return loop;
}

TEST(PipelineScheduleTest, MatmulLoadsRunTwoIterationsAhead) {
  std::unique_ptr<Module> module = layoutAssigned(kMatmulLoop);
  LoopSchedule schedule = scheduleLoop(firstLoop(*module), 3);
  ASSERT_TRUE(schedule.isPipelined()) << schedule.reason;
  ASSERT_EQ(schedule.loads.size(), 2u);
  for (const PipelinedLoad &load : schedule.loads) {
    EXPECT_EQ(load.load->code(), OpCode::Load);
    ASSERT_EQ(load.reads.size(), 1u);
    EXPECT_FALSE(load.reads[0].transposed);
    EXPECT_NE(load.slotEncoding->str().find("#shared<{vec = 8"), std::string::npos);
  }
  // The pointer increments run ahead on their own copies of the two carried pointers.
  ASSERT_EQ(schedule.aheadOps.size(), 2u);
  for (Operation *op : schedule.aheadOps)
    EXPECT_EQ(op->code(), OpCode::AddPtr);
  EXPECT_EQ(schedule.aheadCarried.size(), 2u);
  std::string table = schedule.str();
  EXPECT_NE(table.find("stage 0: #0 load -> ring 0 (3 x 64x32xf16)"), std::string::npos) << table;
  EXPECT_NE(table.find("stage 2: #4 dot"), std::string::npos) << table;
}

TEST(PipelineScheduleTest, DepthComesFromTheLoopThenTheModule) {
  std::unique_ptr<Module> module = layoutAssigned(kMatmulLoop);
  Operation *loop = firstLoop(*module);
  EXPECT_EQ(requestedStages(*loop, *module), 1);
  module->attributes()["num_stages"] = int64_t(4);
  EXPECT_EQ(requestedStages(*loop, *module), 4);
  loop->setAttr("num_stages", int64_t(2));
  EXPECT_EQ(requestedStages(*loop, *module), 2);
  EXPECT_EQ(scheduleLoop(loop, 1).reason, "num_stages < 2");
}

TEST(PipelineScheduleTest, LoadsThatCannotBeRingsStay) {
  // A's masked-off lanes read 1.0, but cp.async fills zeros: A stays a plain load.
  std::string text = kMatmulLoop;
  std::string load = "%36 = load %34 : (tensor<64x32xptr<f16>>) -> tensor<64x32xf16>";
  std::string other =
      "%m = constant {value = 1} : () -> tensor<64x32xi1>\n"
      "      %o = constant {value = 1.0} : () -> tensor<64x32xf16>\n"
      "      %36 = load %34, %m, %o : (tensor<64x32xptr<f16>>, tensor<64x32xi1>, "
      "tensor<64x32xf16>) -> tensor<64x32xf16>";
  text.replace(text.find(load), load.size(), other);
  std::unique_ptr<Module> module = layoutAssigned(text);
  LoopSchedule schedule = scheduleLoop(firstLoop(*module), 3);
  ASSERT_TRUE(schedule.isPipelined()) << schedule.reason;
  ASSERT_EQ(schedule.loads.size(), 1u); // only B
  EXPECT_EQ(schedule.loads[0].load->result()->type().shape(), (std::vector<int64_t>{32, 64}));
}

} // namespace
