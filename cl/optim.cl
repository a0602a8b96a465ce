/* optim.cl - placeholder */
