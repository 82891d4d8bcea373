package delegation

// Prices is what a model's tokens cost, per million input and output
// tokens, in dollars (model.prices; config.Model.Price is one): ok
// false for a model it does not price.
type Prices func(model string) (in, out float64, ok bool)

// Cost is what in input and out output tokens on model cost, in
// dollars; nil when p is nil or does not price model.
func (p Prices) Cost(model string, in, out int) *float64 {
	if p == nil {
		return nil
	}
	inPrice, outPrice, ok := p(model)
	if !ok {
		return nil
	}
	cost := (float64(in)*inPrice + float64(out)*outPrice) / 1e6
	return &cost
}
