package spread

// Skew is the replicas of the fullest domain minus those of the emptiest in counts, which holds
// every domain that counts (an empty one at 0); 0 for no domain. DomainSpread's maxSkew, the
// rebalancer and the placement report all measure by it.
func Skew(counts map[string]int) int {
	first, lo, hi := true, 0, 0
	for _, n := range counts {
		if first || n < lo {
			lo = n
		}
		if first || n > hi {
			hi = n
		}
		first = false
	}
	return hi - lo
}
