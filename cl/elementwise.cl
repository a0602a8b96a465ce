/* elementwise.cl - placeholder */
