// names.js — two small functions called 200 times each, for ptjit's name
// tests: under node --perf-basic-prof --always-sparkplug each gets baseline
// code named "JS:^fooAdd ..." / "JS:^barMul ..." in /tmp/perf-PID.map.
function fooAdd(x) { return x + 7; }
function barMul(x) { return x * 3; }
let acc = 0;
for (let i = 0; i < 200; i++) acc = (acc + fooAdd(i) + barMul(i)) % 1000003;
console.log("node result", acc);
