; sink_increments, alone, on LLVM IR as O3 leaves a pipelined loop (knobs.carried_addresses):
; the increment of a loop-carried pointer that only the header phi uses (%a.next, computed
; before the copy that reads %a) moves to right after that copy (its last use), so the old
; and the new address are never live together. An increment the copies read too (%b.now,
; the form LLVM gives a pointer whose step is not a constant) stays where it is, and so does
; an integer induction variable's.
; RUN: %tessera-opt %s --sink_increments | FileCheck %s
; RUN: %tessera-opt %s | FileCheck %s --check-prefix=NONE

; CHECK-LABEL: define void @copies
; CHECK: loop:
; CHECK: %b.now = getelementptr half, ptr addrspace(1) %b, i64 %step
; CHECK-NEXT: %i.next = add i32 %i, 1
; CHECK-NEXT: call void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3) %dst, ptr addrspace(1) %a, i32 16)
; CHECK-NEXT: %a.next = getelementptr i8, ptr addrspace(1) %a, i64 128
; CHECK-NEXT: call void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3) %dst, ptr addrspace(1) %b.now, i32 16)
; CHECK-NEXT: %done = icmp eq i32 %i.next, %steps
; CHECK-NEXT: br i1 %done

; NONE: loop:
; NONE: %a.next = getelementptr i8, ptr addrspace(1) %a, i64 128
; NONE-NEXT: %b.now

declare void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3), ptr addrspace(1), i32)

define void @copies(ptr addrspace(1) %a0, ptr addrspace(1) %b0, ptr addrspace(3) %dst,
                    i64 %step, i32 %steps) {
entry:
  br label %loop

loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %a = phi ptr addrspace(1) [ %a0, %entry ], [ %a.next, %loop ]
  %b = phi ptr addrspace(1) [ %b0, %entry ], [ %b.now, %loop ]
  %a.next = getelementptr i8, ptr addrspace(1) %a, i64 128
  %b.now = getelementptr half, ptr addrspace(1) %b, i64 %step
  %i.next = add i32 %i, 1
  call void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3) %dst, ptr addrspace(1) %a, i32 16)
  call void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3) %dst, ptr addrspace(1) %b.now, i32 16)
  %done = icmp eq i32 %i.next, %steps
  br i1 %done, label %exit, label %loop

exit:
  ret void
}
