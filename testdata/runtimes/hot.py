# PyPy: a loop hot enough for the tracing JIT (it traces a loop after
# about 1000 iterations), then a function called from it.
import sys

def step(x, i):
    return (x * 31 + i) % 1000003

n = int(sys.argv[1])
acc = 7
for i in range(n):
    acc = step(acc, i)
print("pypy result", acc)
