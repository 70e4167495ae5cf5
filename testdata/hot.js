function f(x) { let s = 0; for (let i = 0; i < 1000; i++) s = (s * 31 + x + i) % 1000003; return s; }
let acc = 0;
for (let i = 0; i < 20000; i++) acc = (acc + f(i)) % 1000003;
console.log("node result", acc);
