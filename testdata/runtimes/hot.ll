; LLVM's lli compiles this module to machine code in memory (MCJIT or ORC)
; and runs main.
@fmt = private constant [16 x i8] c"lli result %ld\0A\00"

declare i32 @printf(i8*, ...)
declare i64 @atol(i8*)

define internal i64 @step(i64 %x, i64 %i) noinline {
  %m = mul i64 %x, 31
  %a = add i64 %m, %i
  %r = srem i64 %a, 1000003
  ret i64 %r
}

define i32 @main(i32 %argc, i8** %argv) {
entry:
  %has = icmp sgt i32 %argc, 1
  br i1 %has, label %arg, label %start
arg:
  %p = getelementptr i8*, i8** %argv, i64 1
  %s = load i8*, i8** %p
  %v = call i64 @atol(i8* %s)
  br label %start
start:
  %n = phi i64 [ 3000, %entry ], [ %v, %arg ]
  br label %loop
loop:
  %i = phi i64 [ 0, %start ], [ %i1, %body ]
  %acc = phi i64 [ 7, %start ], [ %acc1, %body ]
  %done = icmp sge i64 %i, %n
  br i1 %done, label %out, label %body
body:
  %acc1 = call i64 @step(i64 %acc, i64 %i)
  %i1 = add i64 %i, 1
  br label %loop
out:
  %f = getelementptr [16 x i8], [16 x i8]* @fmt, i64 0, i64 0
  call i32 (i8*, ...) @printf(i8* %f, i64 %acc)
  ret i32 0
}
