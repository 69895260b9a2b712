package demo

import (
	"fmt"
	"strings"
)

// menuItemCount is the number of items in the demo menu catalog; with the
// descriptions below it encodes to roughly 1 MB of JSON.
const menuItemCount = 3000

// menuItem is one entry of menu_catalog.
type menuItem struct {
	ItemID      string   `json:"item_id"`
	Name        string   `json:"name"`
	Category    string   `json:"category"`
	Description string   `json:"description"`
	Price       float64  `json:"price"`
	Allergens   []string `json:"allergens"`
}

var (
	menuCategories = []string{"starters", "salads", "soups", "burgers", "wraps", "pizzas", "pasta", "bowls", "grill", "desserts", "drinks", "sides"}
	menuStyles     = []string{"Smoked", "Charred", "Crispy", "Slow-Roasted", "Spiced", "Herb-Crusted", "Glazed", "Braised", "Toasted", "Citrus", "Garden", "Truffle"}
	menuMains      = []string{"Chicken", "Halloumi", "Beef Brisket", "Pulled Pork", "Salmon", "Tofu", "Lamb", "Mushroom", "Prawn", "Chickpea", "Duck", "Aubergine"}
	menuIngredient = []string{"roasted capsicum", "pickled red onion", "baby spinach", "heirloom tomato", "toasted almonds", "shaved fennel", "charred corn", "sweet potato", "black beans", "wild rocket", "fresh coriander", "crumbled feta", "sesame greens", "miso butter", "preserved lemon", "smoked paprika"}
	menuFinish     = []string{"a drizzle of chilli honey", "lemon and garlic aioli", "house-made chimichurri", "a tangy yoghurt dressing", "toasted seeds and herbs", "a rich tamari glaze", "cracked pepper and sea salt", "a bright salsa verde"}
	menuServing    = []string{"Served with seasonal greens.", "Served warm with toasted sourdough.", "Served on a bed of fragrant rice.", "Served with hand-cut chips.", "Best shared between two.", "Available all day."}
	menuStories    = []string{
		"Prepared fresh every morning with produce from local growers.",
		"A favourite with regulars, inspired by street food markets.",
		"Pairs beautifully with a crisp white wine or a house-brewed soda.",
		"Made in small batches, with nothing frozen and no shortcuts.",
	}
	menuAllergens = []string{"gluten", "dairy", "egg", "nuts", "soy", "fish", "shellfish", "sesame"}
)

// menuItems builds the deterministic demo menu. outletID, when set, applies
// that outlet's price level; otherwise brand list prices are used.
func menuItems(outletID string) []menuItem {
	factor := 1.0
	if outletID != "" {
		factor = 0.9 + float64(hash64("price:"+outletID)%21)/100 // 0.90 .. 1.10
	}
	items := make([]menuItem, 0, menuItemCount)
	for i := range menuItemCount {
		id := fmt.Sprintf("itm-%04d", i+1)
		h := hash64("menu:" + id)
		pick := func(list []string, shift uint) string {
			return list[(h>>shift)%uint64(len(list))]
		}
		style, main := pick(menuStyles, 0), pick(menuMains, 8)
		category := menuCategories[i%len(menuCategories)]
		var d strings.Builder
		fmt.Fprintf(&d, "%s %s with %s, %s and %s, finished with %s. %s %s",
			style, strings.ToLower(main), pick(menuIngredient, 16), pick(menuIngredient, 24),
			pick(menuIngredient, 32), pick(menuFinish, 40), pick(menuServing, 44), pick(menuStories, 48))
		var allergens []string
		for j, a := range menuAllergens {
			if (h>>(52+uint(j)))&3 == 0 {
				allergens = append(allergens, a)
			}
		}
		if allergens == nil {
			allergens = []string{}
		}
		base := 4.5 + float64(h%2600)/100
		items = append(items, menuItem{
			ItemID:      id,
			Name:        fmt.Sprintf("%s %s %s", style, main, strings.TrimSuffix(strings.ToUpper(category[:1])+category[1:], "s")),
			Category:    category,
			Description: d.String(),
			Price:       round2(base * factor),
			Allergens:   allergens,
		})
	}
	return items
}
