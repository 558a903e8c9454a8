; sink_predicates, alone, on LLVM IR as O3 leaves it: an i1 compare (and an and of compares)
; defined before a loop and used after it is recomputed after the loop, so that only its
; integer operands stay live across; one operand of each recomputed compare goes through an
; opaque `mov` so that the backend's CSE does not merge it back. A use inside the loop keeps
; the original (recomputing there would cost every iteration), and so does the use in the
; compare's own block. The input is what a masked load before a loop and a masked store after
; it become (the mask of the rows, `offs_m < S`, shared by both after CSE).
; RUN: %tessera-opt %s --sink_predicates | FileCheck %s
; RUN: %tessera-opt %s | FileCheck %s --check-prefix=NONE
; RUN: not %tessera-opt %s --canonicalize 2>&1 | FileCheck %s --check-prefix=TILE-PASS

; CHECK-LABEL: define void @masked_rows
; CHECK: entry:
; CHECK-NEXT: %in = icmp slt i32 %row, %n
; CHECK-NEXT: %colin = icmp slt i32 %col, %n
; CHECK-NEXT: br i1 %in
; CHECK: loop:
; CHECK: select i1 %colin
; CHECK: exit:
; CHECK-NEXT: [[ROW:%[0-9]+]] = call i32 asm sideeffect "mov.b32 $0, $1;", "=r,r"(i32 %row)
; CHECK-NEXT: [[IN:%[0-9]+]] = icmp slt i32 [[ROW]], %n
; CHECK-NEXT: [[COL:%[0-9]+]] = call i32 asm sideeffect "mov.b32 $0, $1;", "=r,r"(i32 %col)
; CHECK-NEXT: [[COLIN:%[0-9]+]] = icmp slt i32 [[COL]], %n
; CHECK-NEXT: [[BOTH:%[0-9]+]] = and i1 [[IN]], [[COLIN]]
; CHECK-NEXT: br i1 [[BOTH]], label %store, label %end

; Without the pass the module prints as it was read.
; NONE: entry:
; NONE: %both = and i1 %in, %colin
; NONE: exit:
; NONE-NEXT: br i1 %both
; NONE-NOT: asm

; TILE-PASS: error: a .ll input is LLVM IR: only LLVM IR passes run on it

define void @masked_rows(ptr addrspace(1) %p, i32 %row, i32 %n, i32 %col, i32 %steps) {
entry:
  %in = icmp slt i32 %row, %n
  %colin = icmp slt i32 %col, %n
  %both = and i1 %in, %colin
  br i1 %in, label %load, label %loop

load:
  store i32 1, ptr addrspace(1) %p
  br label %loop

loop:
  %i = phi i32 [ 0, %entry ], [ 0, %load ], [ %next, %loop ]
  %x = select i1 %colin, i32 %i, i32 0
  store i32 %x, ptr addrspace(1) %p
  %next = add i32 %i, 1
  %done = icmp eq i32 %next, %steps
  br i1 %done, label %exit, label %loop

exit:
  br i1 %both, label %store, label %end

store:
  store i32 2, ptr addrspace(1) %p
  br label %end

end:
  ret void
}
