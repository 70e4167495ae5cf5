package decode

// retStackSize is the number of calls remembered for return compression.
// Like libipt (and the hardware's own limit), older entries are overwritten
// when the stack is full.
const retStackSize = 64

// retStack is the call stack used to resolve compressed returns: a near call
// pushes the address of the next instruction, a ret whose TNT bit is "taken"
// pops it (libipt's pt_retstack).
//
// The zero value is an empty stack.
type retStack struct {
	stack  [retStackSize + 1]uint64
	top    uint8 // next free slot
	bottom uint8 // oldest valid entry; top == bottom means empty
}

// push records a return address, dropping the oldest entry when full.
func (r *retStack) push(ip uint64) {
	r.stack[r.top] = ip
	r.top = retStackNext(r.top)
	if r.top == r.bottom {
		r.bottom = retStackNext(r.bottom)
	}
}

// pop returns the most recent return address; ok is false when the stack is
// empty (libipt: "compressed return without call").
func (r *retStack) pop() (ip uint64, ok bool) {
	if r.top == r.bottom {
		return 0, false
	}
	if r.top == 0 {
		r.top = retStackSize
	} else {
		r.top--
	}
	return r.stack[r.top], true
}

// len returns the number of valid entries.
func (r *retStack) len() int {
	n := int(r.top) - int(r.bottom)
	if n < 0 {
		n += retStackSize + 1
	}
	return n
}

// reset empties the stack.
func (r *retStack) reset() { r.top, r.bottom = 0, 0 }

func retStackNext(i uint8) uint8 {
	if i == retStackSize {
		return 0
	}
	return i + 1
}
